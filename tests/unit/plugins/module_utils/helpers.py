"""Helpers shared by the module_utils unit tests: where the recorded fixtures are, a kubeconfig, and
the fair-share properties' projects.
Reads under ``tests/unit/fixtures/``; writes only where a caller says."""

from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import strategies as st

from ansible_collections.clusterproof.gpu.plugins.module_utils.model.fairshare import Project
from ansible_collections.clusterproof.gpu.plugins.module_utils.node.gpu_benchmark import judge, parse_runner_output

UNIT_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GPU_FIXTURES = UNIT_FIXTURES / "gpu"


def gpu_fixture(name: str) -> str:
    """The text of a recorded GPU fixture, ``tests/unit/fixtures/gpu/<name>``."""
    return (GPU_FIXTURES / name).read_text()


# One H100's ``nvidia-smi -q -x``, as recorded.
H100_XML = gpu_fixture("nvidia-smi-q-x-h100.xml")


def recorded_benchmark(name: str, host: str = "h100-device") -> dict:
    """A recorded runner document judged as the gpu_benchmark module judges it: the host's section."""
    return judge(parse_runner_output(gpu_fixture(name)), host).section_dict()


def write_kubeconfig(path: Path, server: str) -> Path:
    """A kubeconfig at ``path`` for an API server at ``server`` (a token user, one context)."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "cluster", "cluster": {"server": server}}],
                "users": [{"name": "admin", "user": {"token": "t"}}],
                "contexts": [{"name": "cluster", "context": {"cluster": "cluster", "user": "admin"}}],
                "current-context": "cluster",
            }
        )
    )
    return path


@st.composite
def fairshare_projects(draw, **bounds: st.SearchStrategy) -> list[Project]:
    """1 to 4 flat projects ``p0``, ``p1``...: a GPU quota of 0 to 8, maybe a GPU limit and an
    over-quota weight, and each further field of ``bounds`` drawn from its strategy."""
    return [
        Project(
            f"p{i}",
            quota=draw(st.integers(0, 8)),
            limit=draw(st.one_of(st.none(), st.integers(1, 20))),
            weight=draw(st.one_of(st.none(), st.integers(0, 5))),
            **{field: draw(strategy) for field, strategy in bounds.items()},
        )
        for i in range(draw(st.integers(1, 4)))
    ]
