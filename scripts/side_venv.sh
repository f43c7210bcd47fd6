# Sourced by setup_vllm.sh and setup_llamacpp.sh: their engines live in venvs of their own outside the clone and read
# the float32 weights `python -m engine prepare` converted. The caller defines log() and runs under set -euo pipefail.

# fresh_venv PYTHON VENV: an empty venv at VENV, replacing only an earlier venv or an empty folder there.
fresh_venv() {
    if [[ -e "$2" ]]; then
        [[ -f "$2/pyvenv.cfg" || -z "$(ls -A "$2")" ]] || { log "$2 exists and is not a venv; not deleting it"; exit 1; }
        rm -rf "$2"
    fi
    mkdir -p "$(dirname "$2")"
    "$1" -m venv "$2"
}

# link_weights SRC DIR: DIR holding links to SRC's weights, tokenizer and chat template; exit 2 when SRC has none.
link_weights() {
    if [[ ! -f "$1/COMPLETE" || ! -f "$1/model.safetensors" ]]; then
        log "no converted weights in $1: run 'python -m engine prepare' first" >&2; exit 2
    fi
    mkdir -p "$2"
    local f
    for f in model.safetensors tokenizer.json tokenizer_config.json chat_template.jinja; do
        rm -f "$2/$f"
        if [[ -e "$1/$f" ]]; then ln -s "$1/$f" "$2/$f"; fi
    done
}
