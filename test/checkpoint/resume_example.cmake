# train_digits --checkpoint: 4 epochs straight, and 2 epochs then (a new process) 4 with the
# same checkpoint, must end with the same checkpoint contents, bit for bit.
# -D PROGRAM=train_digits -D DATA=digits.csv.gz -D PYTHON=python3 -D FOLDER=scratch folder
include(${CMAKE_CURRENT_LIST_DIR}/train_digits_runs.cmake)
file(REMOVE_RECURSE ${FOLDER})
file(MAKE_DIRECTORY ${FOLDER})
run(--epochs 4 --checkpoint ${FOLDER}/straight.npz)
run(--epochs 2 --checkpoint ${FOLDER}/resumed.npz)
run(--epochs 4 --checkpoint ${FOLDER}/resumed.npz)
if(NOT last_output MATCHES "resumed from [^\n]*resumed.npz after epoch 2")
  message(FATAL_ERROR "the second run did not resume:\n${last_output}")
endif()
execute_process(
  COMMAND ${PYTHON} -c "import sys, numpy as np; assert int(np.load(sys.argv[1])['epochs_done']) == 4"
          ${FOLDER}/resumed.npz
  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the resumed run did not reach 4 epochs:\n${output}")
endif()
require_same_checkpoints(${FOLDER}/straight.npz ${FOLDER}/resumed.npz 180
                         "the resumed run differs from the straight one")
file(REMOVE_RECURSE ${FOLDER})
