"""One versions file: every pinned version is written in module_utils/versions.py and nowhere else.

What counts as "a version literal of a pinned component", per pin of ``versions.PINS``:

- a release vX.Y.Z (or X.Y.Z, as pause's 3.10.2): the version with or without its leading v, and
  for a v-release its line vX.Y (Kubernetes' v1.36 names a package repository and a pause image);
- a version of two numbers (busybox's 1.35): only as an image reference, ``busybox:1.35``, since
  the bare number is any number;
- anything else (a pseudo-version, the Debian suite's name, a tag such as 24.01-py3): the string.

A match that is part of a longer version is not one: v1.36.3 is not in v1.36.30, 1.36.31 or v11.36.3,
but it is in kubeadm's package version 1.36.3-1.1 and etcd's image tag 3.6.8-0, which are made of it.

Where: every file under collections/, roles/ and playbooks/, except the versions file, tests
(``tests/``, the roles' ``molecule/`` scenarios) and Markdown (READMEs and docs may say which
version is pinned, in prose). A module's DOCUMENTATION and a role's argument_specs are not prose
for this: they would say a default that is no longer the pin.

A version in a comment or a docstring counts too: the model and the engine backends cite "the pinned
KAI" (``versions.KAI_SCHEDULER``), and versions.py says, beside each pin, which files were learnt from
it and are to be read again when it moves. One kind of exception, listed with its reason:

- ``OTHER_MEANINGS``: files where the same string means something other than the pin.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest

from ansible_collections.clusterproof.gpu.plugins.lookup import versions as versions_lookup
from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from tests.conftest import REPO

SCANNED = ("collections", "roles", "playbooks")
VERSIONS_FILE = "collections/ansible_collections/clusterproof/gpu/plugins/module_utils/versions.py"
PLUGINS = "collections/ansible_collections/clusterproof/gpu/plugins/"
# (glob of files, pin name): why the pin's string means something else there.
OTHER_MEANINGS = {
    ("roles/*/meta/main.yml", "debian"): "galaxy_info.platforms: the releases a role supports, not the pinned suite",
}
_NUMERIC = re.compile(r"^v?\d+(\.\d+)+$")
# Not preceded by what would make it the tail of a longer version (or of a longer image name), not
# followed by what would make it the head of one.
_BEFORE = r"(?<![0-9A-Za-z.])"
_BEFORE_IMAGE = r"(?<![0-9A-Za-z./_-])"
_AFTER = r"(?![0-9A-Za-z]|\.[0-9])"


def literal_patterns(pin: versions.Pin) -> list[re.Pattern[str]]:
    """The regular expressions that find ``pin``'s version written out (see the module's docstring)."""
    version = pin.version
    if _NUMERIC.match(version):
        bare = re.escape(pin.bare)
        if bare.count(".") < 2:
            name = re.escape(pin.source.rsplit("/", 1)[-1])
            return [re.compile(_BEFORE_IMAGE + name + ":v?" + bare + _AFTER)]
        found = [re.compile(_BEFORE + "v?" + bare + _AFTER)]
        if pin.minor:
            found.append(re.compile(_BEFORE + re.escape(pin.minor) + _AFTER))
        return found
    return [re.compile(_BEFORE + re.escape(version) + _AFTER)]


def patterns_of(pins: dict[str, versions.Pin]) -> dict[str, list[re.Pattern[str]]]:
    return {name: literal_patterns(pin) for name, pin in pins.items()}


PATTERNS = patterns_of(versions.PINS)


def scanned_files() -> list[Path]:
    files = []
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*")):
            relative = path.relative_to(REPO)
            hidden = any(part.startswith(".") for part in relative.parts)
            if not path.is_file() or hidden or "__pycache__" in relative.parts or path.suffix in (".pyc", ".md"):
                continue
            if str(relative) == VERSIONS_FILE or {"tests", "molecule"} & set(relative.parts):
                continue
            files.append(path)
    return files


def literals_in(relative: str, text: str, patterns_by_pin: dict[str, list[re.Pattern[str]]] = PATTERNS) -> list[str]:
    """Each pinned version written in ``text`` (the file ``relative``), as 'file:line: pin literal',
    less the listed exceptions."""
    found = []
    for name, patterns in patterns_by_pin.items():
        if any(fnmatch.fnmatch(relative, glob) and pin == name for glob, pin in OTHER_MEANINGS):
            continue
        for pattern in patterns:
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append("%s:%d: %s %s" % (relative, line, name, match.group(0)))
    return found


def test_a_pinned_version_is_written_only_in_the_versions_file():
    found = []
    for path in scanned_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        found += literals_in(str(path.relative_to(REPO)), text)
    assert found == [], (
        "read these from module_utils/versions.py (roles: lookup('clusterproof.gpu.versions', ...)):\n"
        + "\n".join(found)
    )


# Pins of the tests below, fixed here so that they hold whatever versions.py pins.
EXAMPLE_PINS = patterns_of(
    {
        pin.name: pin
        for pin in (
            versions.Pin("kubernetes", "v1.36.3", versions.GO_MODULE, "k8s.io/kubernetes"),
            versions.Pin("etcd", "v3.6.8", versions.GO_MODULE, "go.etcd.io/etcd/server/v3"),
            versions.Pin("pause", "3.10.2", versions.IMAGE, "registry.k8s.io/pause"),
            versions.Pin("busybox", "1.35", versions.IMAGE, "busybox"),
            versions.Pin("debian", "bookworm", versions.DEBIAN, "http://deb.debian.org/debian"),
            versions.Pin("kai_scheduler", "v0.12.0", versions.GO_MODULE, "github.com/NVIDIA/KAI-scheduler"),
        )
    }
)


def test_the_scan_sees_the_code_the_roles_and_the_playbooks():
    # The scan passes vacuously if it reads nothing: it must see the files that held pins before.
    scanned = {str(path.relative_to(REPO)) for path in scanned_files()}
    assert {
        PLUGINS + "module_utils/sandbox/build.py",
        PLUGINS + "modules/sandbox_binaries.py",
        "roles/kai_scheduler/defaults/main.yml",
        "roles/kubernetes_packages/meta/argument_specs.yml",
        "playbooks/kubernetes.yml",
    } <= scanned
    assert VERSIONS_FILE not in scanned and not any("/molecule/" in name for name in scanned)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("version: v1.36.3", ["kubernetes v1.36.3"]),
        ("kubeadm=1.36.3-1.1", ["kubernetes 1.36.3"]),
        ("https://pkgs.k8s.io/core:/stable:/v1.36/deb/", ["kubernetes v1.36"]),
        ("registry.k8s.io/etcd:3.6.8-0", ["etcd 3.6.8"]),
        ("image: busybox:1.35", ["busybox busybox:1.35"]),
        ("debootstrap bookworm", ["debian bookworm"]),
        # Parts of longer versions, and the same numbers meaning something else, are not pins.
        ("v1.36.30 v11.36.3 1.36.3.1 v1.365 go1.36.3", []),
        ("Kubernetes 1.35+ counts devices; busybox:1.36", []),
        ("pause:3.10 is not pause:3.10.21", []),
    ],
)
def test_what_counts_as_a_pinned_version(text, expected):
    hits = literals_in("roles/example/defaults/main.yml", text, EXAMPLE_PINS)
    assert [hit.split(": ", 1)[1] for hit in hits] == expected


def test_a_version_in_a_comment_or_a_docstring_is_a_literal_too():
    cited = PLUGINS + "module_utils/scheduler/kai.py"
    text = '"""As KAI v0.12.0 does it."""\n# v0.12.0: it listens everywhere\nTAG = "v0.12.0"  # v0.12.0\n'
    assert len(literals_in(cited, text, EXAMPLE_PINS)) == 4


def test_the_galaxy_platforms_are_not_the_pinned_suite():
    text = "galaxy_info:\n  platforms:\n    - name: Debian\n      versions: [bookworm]\n"
    assert literals_in("roles/example/meta/main.yml", text, EXAMPLE_PINS) == []
    assert literals_in("roles/example/tasks/main.yml", text, EXAMPLE_PINS) != []


def test_the_exceptions_name_files_that_exist():
    # An exception that no longer applies is removed, not left to cover a new literal.
    for glob, pin in OTHER_MEANINGS:
        assert pin in versions.PINS and list(REPO.glob(glob)), (glob, pin)


def test_every_pin_says_where_it_comes_from():
    for name, pin in versions.PINS.items():
        assert pin.name == name
        assert pin.kind in versions.KINDS, name
        assert pin.source and pin.version, name
        if pin.kind == versions.CHART:
            assert pin.path, "%s: a chart pin names the chart's folder in its module" % name


def test_the_derived_values():
    assert versions.value("kubernetes") == versions.KUBERNETES.version
    assert versions.value("kubernetes.minor") == versions.KUBERNETES.version.rsplit(".", 1)[0]
    assert versions.value("kubernetes.package_version") == "%s-%s" % (
        versions.KUBERNETES.bare,
        versions.KUBERNETES.package_revision,
    )
    assert versions.value("busybox.image") == "busybox:" + versions.BUSYBOX.version
    assert versions.GPU_OPERATOR_CHART.pin == "github.com/NVIDIA/gpu-operator@" + versions.GPU_OPERATOR_CHART.version
    assert versions.GPU_OPERATOR_CHART.minor == ""


def test_the_previous_kubernetes_is_the_minor_before_the_pinned_one():
    # kubeadm upgrades one minor at a time: the bundle carries N-1 so that a site installed at it can
    # be upgraded to N offline.
    pinned, previous = versions.KUBERNETES, versions.KUBERNETES_PREVIOUS
    assert previous.source == pinned.source and previous.kind == pinned.kind
    assert previous.package_revision == pinned.package_revision
    major, minor = map(int, pinned.minor[1:].split("."))
    assert previous.minor == "v%d.%d" % (major, minor - 1)
    assert versions.value("kubernetes_previous.package_version") == previous.bare + "-" + pinned.package_revision
    # Only what its kubeadm asks for differently from the pinned one's is pinned beside it.
    assert versions.ETCD_PREVIOUS.source == versions.ETCD.source
    assert versions.ETCD_PREVIOUS.version != versions.ETCD.version
    assert versions.PAUSE_PREVIOUS.source == versions.PAUSE.source
    assert versions.PAUSE_PREVIOUS.version != versions.PAUSE.version


@pytest.mark.parametrize(
    ("term", "message"),
    [
        ("kubernetess", "no pinned component 'kubernetess'; the pins are: busybox, coredns_previous, debian"),
        ("kubernetes.colour", "expected one of the attributes version, bare"),
        ("kueue.image", "the kueue pin has no image"),
    ],
)
def test_an_unknown_term_names_what_there_is(term, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        versions.value(term)


def test_the_lookup_hands_the_roles_the_pins():
    lookup = versions_lookup.LookupModule()
    assert lookup.run(["kai_scheduler", "kubernetes.minor"]) == [
        versions.KAI_SCHEDULER.version,
        versions.KUBERNETES.minor,
    ]
    with pytest.raises(Exception, match="no pinned component 'nope'"):
        lookup.run(["nope"])
