#!/usr/bin/env bash
# mpirun wrapper for this repository's own harness (make run, tests, benchmarks). When running as root
# (containers, CI) Open MPI needs explicit permission; oversubscription allows more ranks than cores.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OPENBLAS_NUM_THREADS=1
exec mpirun "$@"
