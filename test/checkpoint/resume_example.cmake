# train_digits --checkpoint: 4 epochs straight, and 2 epochs then (a new process) 4 with the
# same checkpoint, must end with the same checkpoint contents, bit for bit (compared with
# NumPy: the zip entries' timestamps differ, the arrays must not).
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
run(--epochs 4 --checkpoint ${FOLDER}/straight.npz)
run(--epochs 2 --checkpoint ${FOLDER}/resumed.npz)
run(--epochs 4 --checkpoint ${FOLDER}/resumed.npz)
if(NOT last_output MATCHES "resumed from [^\n]*resumed.npz after epoch 2")
  message(FATAL_ERROR "the second run did not resume:\n${last_output}")
endif()
execute_process(
  COMMAND ${PYTHON} -c "
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a.files == b.files, (a.files, b.files)
for name in a.files:
    assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
    assert a[name].tobytes() == b[name].tobytes(), name + ' differs'
assert int(b['epochs_done']) == 4 and int(b['adam/iterations']) == 4 * 45, (b['epochs_done'], b['adam/iterations'])
print('equal:', len(a.files), 'entries')
" ${FOLDER}/straight.npz ${FOLDER}/resumed.npz
  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the resumed run differs from the straight one:\n${output}")
endif()
message(STATUS "${output}")
file(REMOVE_RECURSE ${FOLDER})
