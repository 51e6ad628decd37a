# The consumer programs, given a target tapegrad::tapegrad (found installed, or from
# add_subdirectory). Included by test/consumer/ and test/consumer_subdirectory/.
# Found here too: imported targets of an add_subdirectory()d tapegrad are not visible here.
find_package(xtensor REQUIRED)
find_package(xsimd REQUIRED)  # own_xsimd.cpp turns xsimd on by itself

set(TAPEGRAD_CONSUMER_DIR ${CMAKE_CURRENT_LIST_DIR})
# Units that see only the include directories: no definition from the target, so they decide
# XTENSOR_USE_XSIMD themselves, as a consumer outside CMake might.
add_library(consumer_own_definitions OBJECT
  ${TAPEGRAD_CONSUMER_DIR}/own_xsimd.cpp ${TAPEGRAD_CONSUMER_DIR}/no_xsimd.cpp)
target_include_directories(consumer_own_definitions PRIVATE
  $<TARGET_PROPERTY:tapegrad::tapegrad,INTERFACE_INCLUDE_DIRECTORIES>
  $<TARGET_PROPERTY:xtensor,INTERFACE_INCLUDE_DIRECTORIES>
  $<TARGET_PROPERTY:xsimd,INTERFACE_INCLUDE_DIRECTORIES>)
target_compile_features(consumer_own_definitions PRIVATE cxx_std_17)

add_executable(consumer ${TAPEGRAD_CONSUMER_DIR}/main.cpp $<TARGET_OBJECTS:consumer_own_definitions>)
target_link_libraries(consumer PRIVATE tapegrad::tapegrad)
foreach(target consumer consumer_own_definitions)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
endforeach()
