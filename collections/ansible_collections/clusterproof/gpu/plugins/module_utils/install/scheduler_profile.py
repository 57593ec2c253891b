"""kube-scheduler's configuration on the clusters clusterproof runs: GPUs bin-packed.

kube-scheduler's default scoring (LeastAllocated) spreads pods over nodes, which fragments GPUs: two
jobs of one GPU on two 8-GPU nodes leave no node with 8 idle, and a later 2-GPU job may find one idle
GPU on each of two nodes and wait. GPU sites bin-pack (MostAllocated, GPUs weighted above CPU and
memory), and the fair-share model places jobs that way, so every kube-scheduler clusterproof
configures gets this profile: the sandbox's process (sandbox.control_plane) and kubeadm's static pod
(install.kubeadm_config). It matters for pods the default scheduler places: Kueue's workloads, the
validator's probes; KAI places its own.

Pure: plain dicts out, no imports beyond the standard library.
"""

from __future__ import annotations

from typing import Any

API_VERSION = "kubescheduler.config.k8s.io/v1"
GPU_RESOURCE = "nvidia.com/gpu"
# How much a node's GPU use counts against its CPU and memory use in the score.
GPU_WEIGHT = 5


def configuration(kubeconfig: str, leader_elect: bool) -> dict[str, Any]:
    """A KubeSchedulerConfiguration whose default profile bin-packs GPUs. With ``--config``,
    kube-scheduler ignores its deprecated flags (``--kubeconfig``, ``--leader-elect``): the file says both."""
    return {
        "apiVersion": API_VERSION,
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": kubeconfig},
        "leaderElection": {"leaderElect": leader_elect},
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFit",
                        "args": {
                            "scoringStrategy": {
                                "type": "MostAllocated",
                                "resources": [
                                    {"name": GPU_RESOURCE, "weight": GPU_WEIGHT},
                                    {"name": "cpu", "weight": 1},
                                    {"name": "memory", "weight": 1},
                                ],
                            }
                        },
                    }
                ],
            }
        ],
    }
