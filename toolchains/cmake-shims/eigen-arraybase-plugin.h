/* Body of Eigen::ArrayBase (EIGEN_ARRAYBASE_PLUGIN): min/max with a NaN policy, as in Eigen > 3.4.0. */
template <int NaNPropagation, typename OtherDerived>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE
const CwiseBinaryOp<internal::scalar_min_op<Scalar, Scalar, NaNPropagation>, const Derived, const OtherDerived>
min(const ArrayBase<OtherDerived>& other) const {
  return CwiseBinaryOp<internal::scalar_min_op<Scalar, Scalar, NaNPropagation>, const Derived, const OtherDerived>(
      derived(), other.derived());
}

template <int NaNPropagation>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE
const CwiseBinaryOp<internal::scalar_min_op<Scalar, Scalar, NaNPropagation>, const Derived, const ConstantReturnType>
min(const Scalar& other) const {
  return this->template min<NaNPropagation>(Derived::PlainObject::Constant(rows(), cols(), other));
}

template <int NaNPropagation, typename OtherDerived>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE
const CwiseBinaryOp<internal::scalar_max_op<Scalar, Scalar, NaNPropagation>, const Derived, const OtherDerived>
max(const ArrayBase<OtherDerived>& other) const {
  return CwiseBinaryOp<internal::scalar_max_op<Scalar, Scalar, NaNPropagation>, const Derived, const OtherDerived>(
      derived(), other.derived());
}

template <int NaNPropagation>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE
const CwiseBinaryOp<internal::scalar_max_op<Scalar, Scalar, NaNPropagation>, const Derived, const ConstantReturnType>
max(const Scalar& other) const {
  return this->template max<NaNPropagation>(Derived::PlainObject::Constant(rows(), cols(), other));
}
