#!/usr/bin/env bash
# Slurm Epilog (slurm.conf: Epilog=/etc/slurm/gpusockets-epilog.sh): runs as root on each node of a
# job when the job ends there. Removes the job's RUNDIR/job-ID.env that the Prolog wrote. Then, when
# this node runs a backend itself (its admin socket exists), it waits up to SESSION_WAIT seconds for
# the sessions this job may have left on it to end, and logs those that stay (gpusockets status
# --json): sessions over unix:// (or ring://) of the job's uid, and over tcp:// or tls:// from this node's own
# addresses. On a node shared by several jobs the latter may be another job's: the check is exact
# only where jobs hold their nodes exclusively. It only logs; it never fails (a failing Epilog
# drains the node, and the backend ends a session by itself when its connection closes).
set -uo pipefail
PATH=${PATH:+$PATH:}/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin

conf=${GPUSOCKETS_SLURM_CONF:-/etc/gpusockets/slurm.conf}
rundir=/run/gpusockets-slurm
check=1
wait_s=10
gpusockets=/opt/gpusockets/bin/gpusockets
admin_socket=/run/gpusockets/admin.sock

log() {
    echo "gpusockets-epilog: job ${SLURM_JOB_ID:-?}: $*" >&2
    logger -t gpusockets-slurm -- "epilog: job ${SLURM_JOB_ID:-?}: $*" 2>/dev/null || true
}

if [[ -f $conf ]]; then
    while IFS= read -r line || [[ -n $line ]]; do
        line=${line%%#*}
        [[ $line =~ ^[[:space:]]*([A-Z_]+)=[[:space:]]*([^[:space:]]*)[[:space:]]*$ ]] || continue
        value=${BASH_REMATCH[2]}
        case ${BASH_REMATCH[1]} in
            GPUSOCKETS_SLURM_RUNDIR) rundir=$value ;;
            GPUSOCKETS_SLURM_CHECK_SESSIONS) check=$value ;;
            GPUSOCKETS_SLURM_SESSION_WAIT) wait_s=$value ;;
            GPUSOCKETS_BIN) gpusockets=$value ;;
            GPUSOCKETS_ADMIN_SOCKET) admin_socket=$value ;;
        esac
    done <"$conf"
fi

job=${SLURM_JOB_ID:-}
if [[ ! $job =~ ^[0-9]+(_[0-9]+)?$ ]]; then
    log "SLURM_JOB_ID is missing or not a job id ('$job'): nothing done"
    exit 0
fi
rm -f -- "$rundir/job-$job.env"

[[ $check == 1 && -e $admin_socket && -x $gpusockets ]] || exit 0
[[ $wait_s =~ ^[0-9]+$ ]] || wait_s=10

own_hosts=" 127.0.0.1 ::1 $(hostname -I 2>/dev/null || true) "
uid=${SLURM_JOB_UID:-}

# Prints the peers of the sessions on this node's backend that may be this job's, one a line.
job_sessions() {
    local answer peer host
    answer=$(GPUSOCKETS_ADMIN_SOCKET=$admin_socket "$gpusockets" status --json 2>/dev/null) || return 0
    while IFS= read -r peer; do
        peer=${peer#\"peer\":\"}
        peer=${peer%\"}
        case $peer in
            *" (uid $uid)")
                # unix:// and ring:// peers: "unix:///run/gpusockets/backend.sock (uid 1000)"
                [[ -n $uid ]] && printf '%s\n' "$peer"
                ;;
            tcp://* | tls://*)
                host=${peer#*://}
                host=${host%% *}
                host=${host%:*}
                host=${host#[}
                host=${host%]}
                [[ $own_hosts == *" $host "* ]] && printf '%s\n' "$peer"
                ;;
        esac
    done < <(grep -o '"peer":"[^"]*"' <<<"$answer")
    return 0
}

left=$(job_sessions)
deadline=$((SECONDS + wait_s))
while [[ -n $left ]] && ((SECONDS < deadline)); do
    sleep 1
    left=$(job_sessions)
done
if [[ -n $left ]]; then
    log "sessions from this node still open on the backend $wait_s s after the job: $(paste -sd ';' <<<"$left" | sed 's/;/; /g')"
fi
exit 0
