#!/bin/bash
# Run by SageMaker HyperPod on every node when it is created (LifeCycleConfig.OnCreate), as root,
# from a copy of this folder. The Slurm orchestrator (SlurmConfigStrategy: Managed) configures
# slurmctld / slurmd itself, and FSx for Lustre is mounted by the instance group's FsxLustreConfig;
# this script prepares what sagestack's sbatch scripts expect on every node.
set -euo pipefail

log() { echo "[sagestack on_create] $*"; }

log "node $(hostname)"

# Shared folders on FSx for Lustre (when mounted): code, checkpoints, models. They belong to one group,
# the same gid on every node (FSx stores numeric ids), mode 2770: its members share them and the
# folders they make inherit the group (setgid); nobody else can list, read or write them. A folder
# anyone can write (1777) is one where any user of the cluster could plant a checkpoint that someone
# else's job loads. Add a user with `usermod -aG sagestack NAME` on every node (or in your directory).
shared="${SAGESTACK_SHARED:-/fsx}"
group="${SAGESTACK_GROUP:-sagestack}"
gid="${SAGESTACK_GID:-57700}"
members="${SAGESTACK_GROUP_MEMBERS:-ubuntu}"  # HyperPod's default user; more, space-separated
if mountpoint -q "${shared}"; then
  if existing="$(getent group "${group}")"; then
    if [ "$(echo "${existing}" | cut -d: -f3)" != "${gid}" ]; then
      echo "[sagestack on_create] group ${group} exists with gid $(echo "${existing}" | cut -d: -f3), not ${gid}:" \
        "every node must use one gid for the shared folders (set SAGESTACK_GID to it)" >&2
      exit 1
    fi
  elif getent group "${gid}" >/dev/null; then
    echo "[sagestack on_create] gid ${gid} belongs to group $(getent group "${gid}" | cut -d: -f1):" \
      "set SAGESTACK_GID to a free gid (the same on every node)" >&2
    exit 1
  else
    groupadd --gid "${gid}" "${group}"
  fi
  for user in ${members}; do
    if id -u "${user}" >/dev/null 2>&1; then
      usermod -aG "${group}" "${user}"
    fi
  done
  for folder in "${shared}/sagestack" "${shared}/sagestack/code" "${shared}/sagestack/checkpoints" "${shared}/sagestack/models"; do
    mkdir -p "${folder}"
    chown "root:${group}" "${folder}"
    chmod 2770 "${folder}"
  done
  log "shared folders ready under ${shared}/sagestack (root:${group} 2770; members: ${members})"
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
