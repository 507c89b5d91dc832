#!/usr/bin/env bash
# Slurm Prolog (slurm.conf: Prolog=/etc/slurm/gpusockets-prolog.sh): runs as root on each node of a
# job when the job starts there. When the job asked for the count-only GRES (default rgpu), it writes
# the job's backend list to RUNDIR/job-ID.env (GPUSOCKETS_SERVER=uri,uri...), which the TaskProlog
# (gpusockets-taskprolog.sh) exports into every task and the Epilog (gpusockets-epilog.sh) removes.
#
# The list: every node of the job (scontrol show hostnames "$SLURM_JOB_NODELIST"; with SCOPE=node
# only this node) mapped through the backend map file (PATTERN URI[,URI...] per line, first match
# wins, {node} is the node's name) or, without a match, SCHEME://NODE:PORT; duplicates dropped, in
# node order. Settings: /etc/gpusockets/slurm.conf (KEY=value lines; see deploy/slurm/README.md).
#
# It never fails the job for want of a backend (a failing Prolog drains the node): it logs and
# writes no file, and the job's CUDA programs then say that no backend is set.
set -euo pipefail
# Slurm runs prologs without a search path.
PATH=${PATH:+$PATH:}/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin

conf=${GPUSOCKETS_SLURM_CONF:-/etc/gpusockets/slurm.conf}
port=7070
scheme=tcp
backends=/etc/gpusockets/slurm-backends
gres=rgpu
scope=job
rundir=/run/gpusockets-slurm

log() {
    echo "gpusockets-prolog: job ${SLURM_JOB_ID:-?}: $*" >&2
    logger -t gpusockets-slurm -- "prolog: job ${SLURM_JOB_ID:-?}: $*" 2>/dev/null || true
}

# KEY=value lines, # comments; never sourced (it is read by root).
if [[ -f $conf ]]; then
    while IFS= read -r line || [[ -n $line ]]; do
        line=${line%%#*}
        [[ $line =~ ^[[:space:]]*([A-Z_]+)=[[:space:]]*([^[:space:]]*)[[:space:]]*$ ]] || continue
        value=${BASH_REMATCH[2]}
        case ${BASH_REMATCH[1]} in
            GPUSOCKETS_SLURM_PORT) port=$value ;;
            GPUSOCKETS_SLURM_SCHEME) scheme=$value ;;
            GPUSOCKETS_SLURM_BACKENDS) backends=$value ;;
            GPUSOCKETS_SLURM_GRES) gres=$value ;;
            GPUSOCKETS_SLURM_SCOPE) scope=$value ;;
            GPUSOCKETS_SLURM_RUNDIR) rundir=$value ;;
        esac
    done <"$conf"
fi

job=${SLURM_JOB_ID:-}
if [[ ! $job =~ ^[0-9]+(_[0-9]+)?$ ]]; then
    log "SLURM_JOB_ID is missing or not a job id ('$job'): nothing done"
    exit 0
fi
envfile=$rundir/job-$job.env
# A requeued job keeps its id: what an earlier run left must not outlive a changed request.
rm -f -- "$envfile"

# Count-only GRES: Slurm counts it but sets no variable for it, so ask the controller what the job
# requested (TresPerNode=gres/rgpu:2 in Slurm 21.08 and later, Gres=rgpu:2 before; a type such as
# rgpu:h200:2 matches too).
if [[ -n $gres ]]; then
    request=$(scontrol show job -o "$job" 2>/dev/null || true)
    if [[ -z $request ]]; then
        log "scontrol show job $job answered nothing: cannot tell whether it asked for gres $gres; no backends given"
        exit 0
    fi
    if [[ ! $request =~ (gres[/:]|Gres=|,)$gres([:=,[:space:]]|$) ]]; then
        exit 0
    fi
fi

nodes=()
if [[ $scope == node ]]; then
    nodes=("${SLURMD_NODENAME:-$(hostname -s)}")
else
    mapfile -t nodes < <(scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null || true)
    if ((${#nodes[@]} == 0)); then
        log "scontrol show hostnames '${SLURM_JOB_NODELIST:-}' listed no node; no backends given"
        exit 0
    fi
fi

# What the map file says for node $1 (URIs, comma-separated), or the default.
backend_of() {
    local node=$1 pattern uris
    if [[ -f $backends ]]; then
        while read -r pattern uris _ || [[ -n $pattern ]]; do
            [[ -z $pattern || $pattern == \#* ]] && continue
            # shellcheck disable=SC2053 # the pattern is a glob on purpose (node[01-04] style is not)
            if [[ $node == $pattern ]]; then
                printf '%s\n' "${uris//\{node\}/$node}"
                return 0
            fi
        done <"$backends"
    fi
    printf '%s://%s:%s\n' "$scheme" "$node" "$port"
}

servers=()
declare -A seen=()
for node in "${nodes[@]}"; do
    [[ -n $node ]] || continue
    IFS=, read -r -a uris <<<"$(backend_of "$node")"
    for uri in "${uris[@]}"; do
        [[ -n $uri ]] || continue
        # The TaskProlog prints it in an export line: no spaces, quotes or shell characters.
        if [[ ! $uri =~ ^[a-z][a-z0-9+.-]*://[][A-Za-z0-9._~:/@%-]*$ ]]; then
            log "backend '$uri' (node $node) is not a plain URI: left out"
            continue
        fi
        [[ -n ${seen[$uri]:-} ]] && continue
        seen[$uri]=1
        servers+=("$uri")
    done
done
if ((${#servers[@]} == 0)); then
    log "no backend for nodes ${nodes[*]}: none given"
    exit 0
fi

mkdir -p -- "$rundir"
chmod 755 -- "$rundir"
tmp=$(mktemp "$rundir/.job-$job.XXXXXX")
trap 'rm -f -- "$tmp"' EXIT
(
    IFS=,
    printf 'GPUSOCKETS_SERVER=%s\n' "${servers[*]}"
) >"$tmp"
chmod 644 -- "$tmp"
mv -f -- "$tmp" "$envfile"
trap - EXIT
