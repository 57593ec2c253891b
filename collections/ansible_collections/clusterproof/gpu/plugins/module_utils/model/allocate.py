"""The allocate actions: pending jobs start in idle capacity, evicting nothing.

``admit`` starts pending jobs in submission order, each within its level (fair share; elastic:
within ``max``) and the limit rules (``model.rules``). ``allocate_in_queue_order`` starts them as
the engine's own queue order takes them (``Policy.queue_order``), within the limit rules alone: on
KAI after ``admit``, lending what fair shares leave idle as KAI's allocate action orders its queues
(``kai_queue_order``, the proportion plugin's ``QueueOrderFn``); on Kueue the whole admission, as
its fair-sharing tournament orders the heads of its ClusterQueues (``kueue_admission_order``).
``place_waiting`` (Kueue) puts workloads admitted by quota whose pods wait onto nodes that have room
now. Each is an action of ``Policy.actions``: it takes the engine and says whether it changed
anything.

May import the standard library, ``model.data``, ``model.engine`` and ``model.shares``. Touches
nothing but the engine it is given.
"""

from __future__ import annotations

import heapq

from ansible_collections.clusterproof.gpu.plugins.module_utils.model.data import EPS, INF
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.engine import Engine
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.shares import kueue_drs


def place_waiting(engine: Engine) -> bool:
    """kueue: the admitted workloads whose pods wait go to nodes that have room now, first admitted first."""
    return engine.place_reserved() if engine.reserved else False


def admission_order(engine: Engine) -> list[int]:
    """The pending jobs in the order they are admitted: submission order; kueue: a queue's
    higher-priority work (interactive) first, as a ClusterQueue orders its workloads."""
    pending = engine.pending_jobs()
    if not engine.policy.interactive_first:
        return pending
    pending = [j for j in pending if j not in engine.reserved]
    interactive = [j for j in pending if engine.jobs[j].interactive]
    return interactive + [j for j in pending if not engine.jobs[j].interactive]


def admit(engine: Engine) -> bool:
    """Start pending jobs in submission order (runai: within fair share; elastic: within max)."""
    changed = False
    fair = engine.policy.fair_share
    alloc, entitled, start_units = engine.alloc, engine.entitled, engine.start_units
    gangs = bool(engine.gang_pods)
    whole_fails = INF  # idle capacity only shrinks in this pass: remember the smallest misfit
    fraction_fails = INF
    reserves = engine.reserves
    for j in admission_order(engine):
        if not reserves and not engine.free_whole and not engine.partial_room:
            break
        g = engine.whole[j]
        if (g and g >= whole_fails) or (not g and engine.units[j] >= fraction_fails):
            continue
        if fair and alloc[engine.leaf[j]] + start_units[j] > entitled[engine.leaf[j]] + EPS:
            continue
        if not engine.may_start(j):
            continue
        if gangs and engine.in_core[j]:
            changed = engine.start_gang(j) or changed  # a gang that does not fit says nothing of one pod
        elif engine.try_place(j):
            changed = True
        elif engine.reserves:
            engine.reserve(j)  # Kueue admits by quota: its pods wait for a node
            changed = True
        elif g:
            whole_fails = g
        else:
            fraction_fails = engine.units[j]
    return changed


def kai_queue_order(engine: Engine, a: int, units: int) -> tuple:
    """The pinned KAI's order between two queues (or two departments) for its allocate action, as a
    sort key: the proportion plugin's ``QueueOrderFn`` (plugins/proportion/queue_order/queue_order.go,
    ``GetQueueOrderResult``), queue ``a`` with the ``units`` its next job asks. In turn: a queue not
    above its fair share first (``prioritizeUnderUtilized``); one that stays within its quota with
    the job (``prioritizeUnderQuotaWithJob``); one with an allocatable share above 0
    (``penalizeZeroShareWithJob``); the smaller dominant resource share with the job, held over
    allocatable share, max(quota, fair share) capped by the limit (``prioritizeSmallerResourceShare``,
    ``GetAllocatableShare``; a queue with none weighs its holding x 1000, ``noFairShareDrfMultiplier``);
    the same without the job; the smaller allocatable share; the older queue (declaration order).
    GPUs alone: the bench's queues leave CPU and memory unlimited, whose share is then negligible."""
    alloc, fair, tree = engine.alloc[a], engine.entitled[a], engine.tree
    allocatable = min(tree.limit[a], max(tree.quota[a], fair))
    with_job = alloc + units
    zero = allocatable <= EPS
    if zero:
        share, share_before = with_job * 1000.0, alloc * 1000.0
    else:
        share, share_before = with_job / allocatable, alloc / allocatable
    return (alloc > fair + EPS, with_job > tree.quota[a] + EPS, zero, share, share_before, allocatable, a)


def kueue_admission_order(engine: Engine, q: int, units: int) -> tuple:
    """The pinned Kueue's order between the head workloads of two ClusterQueues of one cohort, as a sort
    key (pkg/scheduler/fair_sharing_iterator.go, ``entryComparer.less``): a workload that fits its
    queue's nominal quota before one that borrows (``FairSharingPrioritizeNonBorrowing``, on by
    default in the pinned release); then the lower dominant resource share of its queue with the workload
    admitted (``computeDRS``, ``CompareDRS``: a queue of weight 0 that would borrow comes after
    every weighted one, and such queues among themselves by their unweighted share,
    ``model.shares.kueue_drs``). Priority and submission order (``PrioritySortingWithinCohort``,
    FIFO) break ties in ``allocate_in_queue_order``."""
    borrowed = engine.alloc[q] + units - engine.tree.quota[q]
    return (borrowed > EPS, *kueue_drs(borrowed, engine.cohort_cap, engine.tree.weight[q]))


def allocate_in_queue_order(engine: Engine) -> bool:
    """One pass over the pending jobs as the engine's allocate cycle takes them: each time the job
    at the head of the queue that comes first in the policy's queue order (``Policy.queue_order``,
    the queue's state with the job counted), within the limit rules alone (neither engine holds a
    queue to its fair share here: KAI lends idle GPUs, its ``AllocateJob`` checks only
    ``IsJobOverQueueCapacityFn``, the limits; Kueue admits what its cohort's quotas cover). A
    queue's jobs go in admission order (``admission_order``). A job that does not start
    leaves its queue's turn to its next job (KAI drops it for the session; Kueue's BestEffortFIFO
    goes on to the next workload). In a tree (``Policy.lend_by_tree``) the order is KAI's
    ``JobsOrderByQueues``: the first department in queue order, its queue counted with the job of
    its own first queue, then that department's first queue; else the queues compared alone."""
    if not engine.reserves and not engine.free_whole and not engine.partial_room:
        return False  # no idle capacity: most passes of a settled site end here, keys unbuilt
    queues: dict[int, list[int]] = {}
    for j in admission_order(engine):
        queues.setdefault(engine.leaf[j], []).append(j)
    if not queues:
        return False
    order = engine.policy.queue_order
    assert order is not None, "allocate_in_queue_order needs Policy.queue_order"
    start_units, jobs = engine.start_units, engine.jobs

    def key(q: int, j: int) -> tuple:
        """Queue q with its next job j; then higher priority (interactive), then submission order."""
        return (order(engine, q, start_units[j]), not jobs[j].interactive, j)

    position = dict.fromkeys(queues, 0)
    tree_order = engine.policy.lend_by_tree and not engine.flat
    heap: list[tuple[tuple, int]] = []
    if not tree_order:
        heap = [(key(q, jobs[0]), q) for q, jobs in queues.items()]
        heapq.heapify(heap)
    changed = False
    whole_fails = INF  # idle capacity only shrinks in this pass: remember the smallest misfit
    fraction_fails = INF
    reserves = engine.reserves
    while True:
        if not reserves and not engine.free_whole and not engine.partial_room:
            break
        if tree_order:
            q = _first_in_tree(engine, queues, position, order)
            if q < 0:
                break
        else:
            if not heap:
                break
            q = heapq.heappop(heap)[1]  # only q's own starts move q's key
        j = queues[q][position[q]]
        g = engine.whole[j]
        placed = False
        if not ((g and g >= whole_fails) or (not g and engine.units[j] >= fraction_fails)) and engine.may_start(j):
            placed = engine.start(j)
            if not placed and reserves:
                engine.reserve(j)  # Kueue admits by quota: its pods wait for a node
                placed = True
            elif not placed and not engine.in_core[j]:
                if g:
                    whole_fails = g
                else:
                    fraction_fails = engine.units[j]
        changed = changed or placed
        position[q] += 1
        if position[q] < len(queues[q]):
            if not tree_order:
                heapq.heappush(heap, (key(q, queues[q][position[q]]), q))
        else:
            del queues[q]
    return changed


def _first_in_tree(engine: Engine, queues: dict[int, list[int]], position: dict[int, int], order) -> int:
    """KAI's ``JobsOrderByQueues`` in a tree (actions/utils/job_order_by_queue.go): among the top
    queues with pending work, the first in queue order, each counted with the next job of its own
    first child (``buildFuncOrderBetweenDepartmentsWithJobs``), and so on down to a leaf; ties in
    submission order of those jobs. The leaf, or -1 when no job is left."""
    tree, start_units = engine.tree, engine.start_units

    def best(members: list[int]) -> tuple[tuple, int, int] | None:
        found = None
        for c in members:
            if tree.children[c]:
                below = best(tree.children[c])
                if below is None:
                    continue
                leaf, j = below[1], below[2]
            elif c in queues:
                leaf, j = c, queues[c][position[c]]
            else:
                continue
            candidate = ((order(engine, c, start_units[j]), not engine.jobs[j].interactive, j), leaf, j)
            if found is None or candidate[0] < found[0]:
                found = candidate
        return found

    chosen = best(tree.top)
    return -1 if chosen is None else chosen[1]
