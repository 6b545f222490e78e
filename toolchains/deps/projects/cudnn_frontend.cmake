# The cuDNN frontend's CMake project as ORT uses it (header-only: the `cudnn_frontend` target and
# CUDNN::cudnn_all), for the frontend's wheel, which ships the headers without the project.
cmake_minimum_required(VERSION 3.18)
project(cudnn_frontend VERSION 1.7.0 LANGUAGES CXX)

find_package(Threads REQUIRED)
# ORT keeps a copy of the frontend's own cuDNN finder (CUDNN::cudnn and CUDNN::cudnn_all from
# CUDNN_PATH, which ORT sets to its --cudnn_home).
if(NOT TARGET CUDNN::cudnn_all)
  include(${CMAKE_SOURCE_DIR}/external/cuDNN.cmake)
endif()

add_library(cudnn_frontend INTERFACE)
target_include_directories(cudnn_frontend INTERFACE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(cudnn_frontend INTERFACE Threads::Threads)
