# train_digits --function: 2 epochs with every training step one tapegrad::Function (traced
# on the first batch of each shape, then replayed) must end with the checkpoint of 2 eager
# epochs, bit for bit, and no step may fall back to eager (no "cannot be replayed" warning).
# -D PROGRAM=train_digits -D DATA=digits.csv.gz -D PYTHON=python3 -D FOLDER=scratch folder
include(${CMAKE_CURRENT_LIST_DIR}/train_digits_runs.cmake)
file(REMOVE_RECURSE ${FOLDER})
file(MAKE_DIRECTORY ${FOLDER})
run(--epochs 2 --checkpoint ${FOLDER}/eager.npz)
run(--epochs 2 --function --checkpoint ${FOLDER}/function.npz)
if(NOT last_output MATCHES "each step one tapegrad::Function")
  message(FATAL_ERROR "--function was not taken:\n${last_output}")
endif()
if(last_output MATCHES "cannot be replayed")
  message(FATAL_ERROR "a training step ran eagerly:\n${last_output}")
endif()
require_same_checkpoints(${FOLDER}/eager.npz ${FOLDER}/function.npz 90
                         "the --function run differs from the eager one")
file(REMOVE_RECURSE ${FOLDER})
