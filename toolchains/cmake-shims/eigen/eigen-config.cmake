# ORT declares Eigen without FIND_PACKAGE_ARGS, so FETCHCONTENT_TRY_FIND_PACKAGE_MODE=ALWAYS
# looks for a package named "eigen". Forward to the system's Eigen3 (target Eigen3::Eigen).
find_package(Eigen3 CONFIG REQUIRED)
set(eigen_FOUND TRUE)
