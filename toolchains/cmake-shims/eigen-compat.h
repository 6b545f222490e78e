/* Force-included (see eigen-compat.cmake) before any Eigen header.
 * Eigen 3.4.0 (Debian's) has NaN-propagating min/max functors, but not the
 * ArrayBase::min<NaNPropagation>()/max<NaNPropagation>() members of later Eigen that ORT's
 * element_wise_ops.cc calls. Eigen's documented plugin hook adds them to ArrayBase. */
#ifndef ORCH_EIGEN_COMPAT_H
#define ORCH_EIGEN_COMPAT_H
#ifndef EIGEN_ARRAYBASE_PLUGIN
#define EIGEN_ARRAYBASE_PLUGIN "eigen-arraybase-plugin.h"
#endif
#endif
