# What the train_digits example tests share: run(<flags>) runs PROGRAM on DATA (FATAL_ERROR
# when it fails; its output in last_output), and require_same_checkpoints(a b iterations)
# compares two checkpoint files with NumPy, array by array, bit for bit (the zip entries'
# timestamps differ, the arrays must not), and requires Adam's step count in b.
# Needs -D PROGRAM=train_digits -D DATA=digits.csv.gz -D PYTHON=python3 -D FOLDER=scratch.
function(run)
  execute_process(COMMAND ${PROGRAM} --data ${DATA} --curve ${FOLDER}/curve.csv ${ARGN}
                  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "train_digits ${ARGN} failed (${status}):\n${output}")
  endif()
  set(last_output "${output}" PARENT_SCOPE)
endfunction()

function(require_same_checkpoints a b iterations what)
  execute_process(
    COMMAND ${PYTHON} -c "
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a.files == b.files, (a.files, b.files)
for name in a.files:
    assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
    assert a[name].tobytes() == b[name].tobytes(), name + ' differs'
assert int(b['adam/iterations']) == int(sys.argv[3]), b['adam/iterations']
print('equal:', len(a.files), 'entries')
" ${a} ${b} ${iterations}
    RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${what}:\n${output}")
  endif()
  message(STATUS "${output}")
endfunction()
