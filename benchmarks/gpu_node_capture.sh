#!/usr/bin/env bash
# Capture one GPU node's real outputs for railforge's parsers and benchmark fixtures: the nvidia-smi views
# the hardware facts read and the facts made of them, dcgmi (where installed), nccl-tests built from a source
# tree on the node, and railforge's ResNet-50 benchmark (deploy/openmpi/railforge-resnet50) on one GPU.
#
#   benchmarks/gpu_node_capture.sh OUTDIR [NCCL_TESTS_SRC]
#
# NCCL_TESTS_SRC is an nccl-tests checkout; NCCL comes from the node's Python (the nvidia-nccl wheel
# PyTorch uses) unless NCCL_HOME is set, CUDA from the nvcc on PATH unless CUDA_HOME is set, the GPU code
# from the first GPU's compute capability unless NVCC_GENCODE is set.
# Each step writes its own file and a failed step does not stop the next; the exit code counts the failures.
set -uo pipefail

usage="usage: $0 OUTDIR [NCCL_TESTS_SRC]"
out=${1:?$usage}
nccl_tests_src=${2:-}
repo=$(cd "$(dirname "$0")/.." && pwd)

fail() {
    echo "$0: $*" >&2
    exit 2
}

# Check what the nccl-tests build needs before anything is written.
if [ -n "$nccl_tests_src" ]; then
    [ -f "$nccl_tests_src/src/Makefile" ] || fail "NCCL_TESTS_SRC $nccl_tests_src: no src/Makefile (not an nccl-tests tree)"
    tests=()
    for test in all_reduce all_gather reduce_scatter broadcast sendrecv; do
        [ -f "$nccl_tests_src/src/$test.cu" ] && tests+=("$test")
    done
    [ ${#tests[@]} -gt 0 ] || fail "NCCL_TESTS_SRC $nccl_tests_src: none of all_reduce, all_gather, reduce_scatter," \
        "broadcast, sendrecv has a src/<name>.cu"
    if [ -z "${CUDA_HOME:-}" ]; then
        nvcc=$(command -v nvcc) || fail "no nvcc on PATH and CUDA_HOME unset: nccl-tests needs the CUDA compiler"
        CUDA_HOME=$(dirname "$(dirname "$nvcc")")
    fi
    [ -x "$CUDA_HOME/bin/nvcc" ] || fail "CUDA_HOME $CUDA_HOME: no bin/nvcc"
    if [ -n "${NCCL_HOME:-}" ]; then
        [ -f "$NCCL_HOME/include/nccl.h" ] || fail "NCCL_HOME $NCCL_HOME: no include/nccl.h"
    else
        wheel=$(python3 -c 'import nvidia.nccl; print(nvidia.nccl.__path__[0])' 2>/dev/null) ||
            fail "NCCL_HOME unset and python3 has no nvidia.nccl (the nvidia-nccl wheel): set NCCL_HOME"
    fi
    if [ -z "${NVCC_GENCODE:-}" ]; then
        capability=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')
        [[ $capability =~ ^[0-9]+$ ]] || fail "nvidia-smi gave no compute capability: set NVCC_GENCODE"
        NVCC_GENCODE="-gencode=arch=compute_$capability,code=sm_$capability"
    fi
fi

mkdir -p "$out"
failures=0

step() {  # step NAME COMMAND...: run COMMAND, its output (both streams) in OUTDIR/NAME.txt
    local name=$1
    shift
    echo "== $name: $*"
    "$@" >"$out/$name.txt" 2>&1
    local status=$?
    if [ "$status" -ne 0 ]; then
        echo "   failed (exit $status), see $name.txt"
        failures=$((failures + 1))
    fi
}

versions() {
    grep PRETTY_NAME /etc/os-release
    uname -r
    echo "cpus $(nproc)"
    free -g | head -n 2
    nvidia-smi --version
    nvcc --version | tail -n 2
    python3 -c 'import sys, torch, torchvision
print("python", sys.version.split()[0], "torch", torch.__version__, "torchvision", torchvision.__version__,
      "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))'
    python3 -c 'import mpi4py; from mpi4py import MPI; print("mpi4py", mpi4py.__version__, MPI.Get_library_version())'
}

step versions versions
step nvidia-smi nvidia-smi
step nvidia-smi-L nvidia-smi -L
step nvidia-smi-q nvidia-smi -q
step nvidia-smi-topo nvidia-smi topo -m
step nvidia-smi-query nvidia-smi --query-gpu=index,name,driver_version,persistence_mode,mig.mode.current,pci.bus_id \
    --format=csv,noheader
# What the railforge_hw_facts module makes of this node, from its sysfs and the outputs above
step railforge-hw-facts python3 -c '
import json, pathlib, sys
sys.path.insert(0, sys.argv[1])
from railforge_hwfacts import gather_hw_facts
out = pathlib.Path(sys.argv[2])
facts = gather_hw_facts(topo_text=(out / "nvidia-smi-topo.txt").read_text(),
                        nvidia_smi_q_text=(out / "nvidia-smi-q.txt").read_text())
print(json.dumps(facts, indent=1, sort_keys=True))' "$repo/plugins/module_utils" "$out"
if command -v dcgmi >/dev/null; then
    step dcgmi-diag-r1 dcgmi diag -r 1
else
    echo "== dcgmi: not installed on this node, no dcgmi diag output"
fi

if [ -n "$nccl_tests_src" ]; then
    build=$(mktemp -d)
    if [ -z "${NCCL_HOME:-}" ]; then  # the wheel's lib/ has libnccl.so.2 only; the build links -lnccl
        NCCL_HOME=$build/nccl
        mkdir -p "$NCCL_HOME/lib"
        ln -s "$wheel/include" "$NCCL_HOME/include"
        ln -s "$wheel/lib/libnccl.so.2" "$NCCL_HOME/lib/libnccl.so.2"
        ln -s libnccl.so.2 "$NCCL_HOME/lib/libnccl.so"
    fi
    binaries=()
    for test in "${tests[@]}"; do
        binaries+=("$build/${test}_perf")
    done
    # NCCL_HOME names NCCL for later nccl-tests Makefiles, NCCLDIR for the earliest
    step nccl-tests-build make -C "$nccl_tests_src/src" -j "$(nproc)" MPI=0 BUILDDIR="$build" \
        CUDA_HOME="$CUDA_HOME" NCCL_HOME="$NCCL_HOME" NCCLDIR="$NCCL_HOME" NVCC_GENCODE="$NVCC_GENCODE" \
        "${binaries[@]}"
    libraries=$NCCL_HOME/lib:$CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    for test in "${tests[@]}"; do
        LD_LIBRARY_PATH=$libraries NCCL_DEBUG=INFO step "${test}_perf-g1" "$build/${test}_perf" -b 8 -e 1G -f 2 -g 1
    done
fi

for batch in 32 256; do
    step "resnet50-cuda-batch$batch" python3 "$repo/deploy/openmpi/railforge-resnet50" --device cuda \
        --batch "$batch" --steps 100 --warmup 10
done

echo "$failures step(s) failed"
exit "$failures"
