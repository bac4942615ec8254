#!/bin/bash
# Run by SageMaker HyperPod on every node when it is created (LifeCycleConfig.OnCreate), as root,
# from a copy of this folder. The Slurm orchestrator (SlurmConfigStrategy: Managed) configures
# slurmctld / slurmd itself, and FSx for Lustre is mounted by the instance group's FsxLustreConfig;
# this script prepares what sagestack's sbatch scripts expect on every node.
set -euo pipefail

log() { echo "[sagestack on_create] $*"; }

log "node $(hostname)"

# Shared folders on FSx for Lustre (when mounted): code, checkpoints, models.
shared="${SAGESTACK_SHARED:-/fsx}"
if mountpoint -q "${shared}"; then
  mkdir -p "${shared}/sagestack/code" "${shared}/sagestack/checkpoints" "${shared}/sagestack/models"
  chmod 1777 "${shared}/sagestack" "${shared}/sagestack/checkpoints" "${shared}/sagestack/models"
  log "shared folders ready under ${shared}/sagestack"
else
  log "${shared} is not mounted: jobs will use node-local folders"
fi

# Allow many open files and locked memory for NCCL / EFA.
cat > /etc/security/limits.d/90-sagestack.conf <<'LIMITS'
* soft nofile 1048576
* hard nofile 1048576
* soft memlock unlimited
* hard memlock unlimited
LIMITS
log "done"
