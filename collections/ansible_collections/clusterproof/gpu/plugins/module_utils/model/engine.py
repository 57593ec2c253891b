"""The engine of one prediction: the placement state, the limit rules and the victim ranking, with the
levels its policy holds projects to, running the policy's actions until nothing changes.

``Engine`` reads the input (``model.state``), then sets each project's levels: under a fair-share
policy its fair share (``model.shares``, of the capacity, or of the cohort's quotas for Kueue) and
the quota part of it, the two tiers reclaim works to; else (elastic) its quota. ``settle`` runs the
policy's actions (``Policy.actions``) in order, again and again until none changes anything, so that
predicting again from the result changes nothing. The engine compares no policy's name: what differs
is the ``Policy`` value (``model.policy``).

May import the standard library, ``model.data``, ``model.policy``, ``model.shares``, ``model.tree``
and ``model.victims`` (which brings ``model.rules`` and ``model.state``). Touches nothing outside its
arguments.
"""

from __future__ import annotations

from ansible_collections.clusterproof.gpu.plugins.module_utils.model import shares
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.data import RESOURCES
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.victims import Victims


class Engine(Victims):
    """Mutable cluster state for one prediction, and the policy that moves it."""

    def set_levels(self) -> None:
        """Each project's levels under the policy, once the state is read (``State.__init__`` ends here)."""
        policy, tree = self.policy, self.tree
        count = len(tree.projects)
        demand = [0.0] * count
        interactive_demand = [0.0] * count
        for job, q, units in zip(self.jobs, self.leaf, self.units, strict=True):
            if job.interactive:
                interactive_demand[q] += units
            else:
                demand[q] += units
        if policy.fair_share:
            # interactive work beyond the quota never starts, so it claims no share
            for q in range(count):
                demand[q] += min(interactive_demand[q], tree.quota[q])
            # Kueue admits against its cohort's nominal quotas, not the cluster: what the cohort can
            # admit in all is their sum (the differential bench: a cohort of quotas 3, 2, 2 on 16
            # GPUs admits 7).
            shared = min(self.capacity, self.cohort_cap)
            self.entitled = shares.divide(tree, demand, shared, whole_units=policy.whole_gpus)
            # the quota part of the fair share: what KAI's second reclaim strategy protects
            self.guaranteed = [min(quota, share) for quota, share in zip(tree.quota, self.entitled, strict=True)]
            self.tiers = [self.entitled, self.guaranteed]
            if self.multi:
                self._resource_levels()
        else:
            self.entitled = list(tree.quota)
            self.guaranteed = self.entitled
            self.tiers = [self.entitled]

    def _resource_levels(self) -> None:
        """Per resource, the fair share (tier 0) and the quota part of it (tier 1), as for the GPUs:
        KAI lets a queue reclaim only while every resource stays within its fair share (and, by the
        second strategy, its quota), and takes from a queue above either in any resource."""
        count = len(self.tree.projects)
        self.res_levels: list[list[list[float]]] = []
        for r in range(len(RESOURCES)):
            demand = [0.0] * count
            for j, request in enumerate(self.res_req):
                demand[self.leaf[j]] += request[r]
            sub = self.tree.for_resource(r)
            fair = shares.divide(sub, demand, self.res_capacity[r], whole_units=True)
            self.res_levels.append([fair, [min(quota, share) for quota, share in zip(sub.quota, fair, strict=True)]])

    def settle(self) -> None:
        """Run the policy's actions in order until none changes anything (each runs every time)."""
        actions = self.policy.actions
        while True:
            changed = False
            for action in actions:
                changed = action(self) or changed
            if not changed:
                return
