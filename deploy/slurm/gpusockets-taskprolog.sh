#!/usr/bin/env bash
# Slurm TaskProlog (slurm.conf: TaskProlog=/etc/slurm/gpusockets-taskprolog.sh): runs as the job's
# user before each task; slurmstepd reads its stdout, and each "export NAME=value" line sets NAME in
# the task's environment. It exports what the Prolog (gpusockets-prolog.sh) wrote for this job, so
# CUDA programs in the task reach the backends of the job's allocation through our libcuda.so.1.
# A GPUSOCKETS_SERVER the user set (sbatch/srun --export, the job script) is left as it is.
set -uo pipefail
PATH=${PATH:+$PATH:}/usr/local/bin:/usr/bin:/bin

conf=${GPUSOCKETS_SLURM_CONF:-/etc/gpusockets/slurm.conf}
rundir=/run/gpusockets-slurm
if [[ -r $conf ]]; then
    value=$(sed -n 's/^[[:space:]]*GPUSOCKETS_SLURM_RUNDIR=[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$conf" | tail -n 1)
    rundir=${value:-$rundir}
fi

job=${SLURM_JOB_ID:-}
[[ $job =~ ^[0-9]+(_[0-9]+)?$ ]] || exit 0
envfile=$rundir/job-$job.env
[[ -r $envfile ]] || exit 0
[[ -z ${GPUSOCKETS_SERVER:-} ]] || exit 0

while IFS= read -r line; do
    # Only the names and the plain values the Prolog writes: this output is read by slurmstepd.
    if [[ $line =~ ^(GPUSOCKETS_[A-Z_]+)=([][A-Za-z0-9._~:/@%,+-]+)$ ]]; then
        printf 'export %s=%s\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
    fi
done <"$envfile"
exit 0
