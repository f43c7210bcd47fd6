#!/usr/bin/env bash
# Build llama.cpp (llama-cpp-python from PyPI) next to the project, once, and give it our SmolLM2 weights as GGUF.
#
# llama.cpp is the CPU engine most people reach for; `python -m engine bench` times it beside our engine
# (engine/labs/bench_llamacpp.py). It lives in its own venv OUTSIDE the clone so every checkout reuses it:
#   venv   $TWO_BENDS_LLAMACPP_VENV (default $TWO_BENDS_CACHE/llamacpp-venv): llama-cpp-python built from
#          its sdist with this CPU's native flags (-march=native) and OpenMP: ~21 min on 2 busy vCPUs, 450 MB.
#   GGUF   $TWO_BENDS_LLAMACPP_MODELS (default $TWO_BENDS_CACHE/smollm2-135m-gguf): smollm2-135m-{f32,bf16,f16,q8_0}.gguf,
#          written by llama.cpp's own converter (convert_hf_to_gguf.py from the same sdist) from the float32
#          weights `python -m engine prepare` converted: the SAME weights our engine runs, at each precision.
# where TWO_BENDS_CACHE defaults to ~/.cache/two-bends, as for the engine.
# Then a check: llama.cpp's greedy tokens at float32 beside our engine's for a short prompt (printed either way).
# Safe to run again: each part is skipped while its stamp file (written last) matches; a second run takes
# about a second plus the check. LLAMACPP_SETUP_FORCE=1 rebuilds everything. LLAMACPP_JOBS sets the build's
# parallel jobs (default: the number of CPUs).
# Exit codes: 0 ready, 1 build, conversion or check failed, 2 the converted weights are missing.
set -euo pipefail
case "${1:-}" in -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;; esac

LLAMACPP_VERSION="0.3.36"
CMAKE_FLAGS="-DGGML_NATIVE=ON -DGGML_OPENMP=ON -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
STAMP="llama-cpp-python==${LLAMACPP_VERSION} ${CMAKE_FLAGS} cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | xargs) v1"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TWO_BENDS_CACHE:-${HOME}/.cache/two-bends}"
VENV="${TWO_BENDS_LLAMACPP_VENV:-${CACHE}/llamacpp-venv}"
SRC="${TWO_BENDS_F32_DIR:-${CACHE}/smollm2-135m-instruct-q4_1-f32}"
DST="${TWO_BENDS_LLAMACPP_MODELS:-${CACHE}/smollm2-135m-gguf}"
PY="${PYTHON:-python3}"
JOBS="${LLAMACPP_JOBS:-$(nproc 2>/dev/null || echo 2)}"
SDIST="${VENV}/src/llama_cpp_python-${LLAMACPP_VERSION}"
log() { echo "[setup_llamacpp] $*"; }
source "$(dirname "${BASH_SOURCE[0]}")/side_venv.sh"

# --- the venv -------------------------------------------------------------------------------------
if [[ "${LLAMACPP_SETUP_FORCE:-0}" != 1 && -x "${VENV}/bin/python" && -d "$SDIST" \
      && "$(cat "${VENV}/.two-bends-llamacpp-ready" 2>/dev/null)" == "$STAMP" ]]; then
    log "venv ready: ${VENV} (${STAMP})"
else
    command -v cmake >/dev/null && { command -v cc >/dev/null || command -v gcc >/dev/null; } \
        || { log "llama-cpp-python builds from source: it needs cmake and a C/C++ compiler"; exit 1; }
    log "building llama-cpp-python==${LLAMACPP_VERSION} into ${VENV} (${JOBS} jobs; ~20 min on 2 cores)"
    fresh_venv "$PY" "$VENV"
    # The sdist is kept: its vendor/llama.cpp/convert_hf_to_gguf.py writes the GGUF files below.
    mkdir -p "${VENV}/src"
    "${VENV}/bin/pip" download --no-deps --no-binary :all: -d "${VENV}/src" "llama-cpp-python==${LLAMACPP_VERSION}" \
        > "${VENV}/two-bends-pip.log" 2>&1 || { tail -20 "${VENV}/two-bends-pip.log" >&2; log "download failed"; exit 1; }
    tar xzf "${VENV}/src/llama_cpp_python-${LLAMACPP_VERSION}.tar.gz" -C "${VENV}/src"
    if ! CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" \
            "${VENV}/bin/pip" install --progress-bar off --no-cache-dir -v "${SDIST}" \
            >> "${VENV}/two-bends-pip.log" 2>&1; then
        tail -30 "${VENV}/two-bends-pip.log" >&2
        log "build failed (full log: ${VENV}/two-bends-pip.log)"; exit 1
    fi
    "${VENV}/bin/python" -c 'import llama_cpp; print("llama_cpp", llama_cpp.__version__)' \
        || { log "import llama_cpp failed"; exit 1; }
    printf '%s\n' "$STAMP" > "${VENV}/.two-bends-llamacpp-ready"
    log "venv ready: ${VENV} ($(du -sh "$VENV" | cut -f1))"
fi

# --- the GGUF files -------------------------------------------------------------------------------
# llama.cpp's own converter (from the sdist above) reads a Hugging Face folder: symlinks to our float32 weights and
# tokenizer plus a config.json naming the architecture (our converter writes "architectures": null). It runs on the
# project's Python (torch, transformers, safetensors) with sentencepiece, which it imports before it looks for a
# tokenizer.model, installed beside llama.cpp's venv rather than into the project's.
PROJECT_PY="${ROOT}/.venv/bin/python"; [[ -x "$PROJECT_PY" ]] || PROJECT_PY="$PY"
TYPES=(f32 bf16 f16 q8_0)
tag="from ${SRC} converted $(stat -c %Y "${SRC}/COMPLETE" 2>/dev/null || echo never) by llama-cpp-python==${LLAMACPP_VERSION}: ${TYPES[*]}"
if [[ "${LLAMACPP_SETUP_FORCE:-0}" != 1 && "$(cat "${DST}/.two-bends-gguf-ready" 2>/dev/null)" == "$tag" ]]; then
    log "GGUF files ready: ${DST} (${TYPES[*]})"
else
    [[ "$(realpath -m "$DST")" != "$(realpath -m "$SRC")" ]] || { log "TWO_BENDS_LLAMACPP_MODELS must differ from ${SRC}"; exit 1; }
    HF="${DST}/hf"
    rm -rf "$HF" "${DST}/.two-bends-gguf-ready"
    link_weights "$SRC" "$HF"
    EXTRAS="${VENV}/converter-extras"
    if ! "$PROJECT_PY" -c "import sys; sys.path.insert(0, '${EXTRAS}'); import sentencepiece" 2>/dev/null; then
        "$PROJECT_PY" -m pip install --quiet --disable-pip-version-check --target "$EXTRAS" sentencepiece \
            >> "${VENV}/two-bends-pip.log" 2>&1 || { log "pip install sentencepiece failed"; exit 1; }
    fi
    "$PROJECT_PY" - "${SRC}/config.json" "${HF}/config.json" <<'PYEOF'
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg["architectures"] = ["LlamaForCausalLM"]
cfg.setdefault("model_type", "llama")
if "rope_theta" in (cfg.get("rope_parameters") or {}):
    cfg.setdefault("rope_theta", cfg["rope_parameters"]["rope_theta"])
json.dump(cfg, open(sys.argv[2], "w"), indent=2)
PYEOF
    for t in "${TYPES[@]}"; do
        out="${DST}/smollm2-135m-${t}.gguf"
        log "writing ${out}"
        if ! PYTHONPATH="$EXTRAS" "$PROJECT_PY" "${SDIST}/vendor/llama.cpp/convert_hf_to_gguf.py" "$HF" \
                --outtype "$t" --outfile "${out}.part" > "${DST}/convert-${t}.log" 2>&1; then
            tail -15 "${DST}/convert-${t}.log" >&2
            log "converting to ${t} failed (full log: ${DST}/convert-${t}.log)"; exit 1
        fi
        mv "${out}.part" "$out"
    done
    printf '%s\n' "$tag" > "${DST}/.two-bends-gguf-ready"
    log "GGUF files ready: ${DST} ($(cd "$DST" && du -h ./*.gguf | tr '\t\n' ' '))"
fi

# --- the check: the same greedy tokens as our engine at float32 -------------------------------------
cd "$ROOT"
if "$PROJECT_PY" -m engine.labs.bench_llamacpp; then
    log "check passed"
else
    rc=$?
    log "check: llama.cpp and our engine $([[ $rc == 1 ]] && echo "disagree (above)" || echo "could not be compared")"
    exit 1
fi
echo "LLAMACPP_PYTHON=${VENV}/bin/python"
echo "LLAMACPP_MODELS_DIR=${DST}"
