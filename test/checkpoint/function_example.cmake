# train_digits --function: 2 epochs with every training step one tapegrad::Function (traced
# on the first batch of each shape, then replayed) must end with the checkpoint of 2 eager
# epochs, bit for bit, and no step may fall back to eager (no "cannot be replayed" warning).
# -D PROGRAM=train_digits -D DATA=digits.csv.gz -D PYTHON=python3 -D FOLDER=scratch folder
file(REMOVE_RECURSE ${FOLDER})
file(MAKE_DIRECTORY ${FOLDER})
function(run)
  execute_process(COMMAND ${PROGRAM} --data ${DATA} --curve ${FOLDER}/curve.csv ${ARGN}
                  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "train_digits ${ARGN} failed (${status}):\n${output}")
  endif()
  set(last_output "${output}" PARENT_SCOPE)
endfunction()
run(--epochs 2 --checkpoint ${FOLDER}/eager.npz)
run(--epochs 2 --function --checkpoint ${FOLDER}/function.npz)
if(NOT last_output MATCHES "each step one tapegrad::Function")
  message(FATAL_ERROR "--function was not taken:\n${last_output}")
endif()
if(last_output MATCHES "cannot be replayed")
  message(FATAL_ERROR "a training step ran eagerly:\n${last_output}")
endif()
execute_process(
  COMMAND ${PYTHON} -c "
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a.files == b.files, (a.files, b.files)
for name in a.files:
    assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
    assert a[name].tobytes() == b[name].tobytes(), name + ' differs'
assert int(b['adam/iterations']) == 2 * 45, b['adam/iterations']
print('equal:', len(a.files), 'entries')
" ${FOLDER}/eager.npz ${FOLDER}/function.npz
  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the --function run differs from the eager one:\n${output}")
endif()
message(STATUS "${output}")
file(REMOVE_RECURSE ${FOLDER})
