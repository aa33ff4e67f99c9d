"""Consoles that end inside a wait their framework declared (`emitters/stalls.py`), and
ones whose wait ended or failed: what `runwatch watch -- cat` of a saved console must leave
open, or finish (tests/unit/emitters/test_watch_cli.py, tests/e2e/test_watch_left_open.py).
"""

from __future__ import annotations

#: Real lines, as users posted them: a rank in torch's store-based barrier, written every
#: 10 s while a rank is missing (RVT on Lightning, Hydra's log format: corpus13's
#: fail_rvt_lightning_two_gpu_...), the same barrier in another job filling (Lightning Flash:
#: corpus16's control_lightning_flash_...), torch's timeout raised from it (accelerate:
#: corpus12's fail_accelerate_init_...), Lightning's ranks each entering its rendezvous
#: twice (pytorch-lightning#4389), vLLM V1's stats line (vllm/v1/metrics/loggers.py) and its
#: message queue's warning (shm_broadcast.py, 0.10 at INFO).
BARRIER_WAIT = (
    "[2023-07-16 13:17:36,147][torch.distributed.distributed_c10d][INFO] - Waiting in store "
    "based barrier to initialize process group for rank: 0, key: store_based_barrier_key:1 "
    "(world_size=2, worker_count=1, timeout=0:30:00)\n"
)
BARRIER_FILLS = (
    "02/21/2022 13:46:14 - INFO - torch.distributed.distributed_c10d -   Waiting in store "
    "based barrier to initialize process group for rank: 3, key: store_based_barrier_key:1 "
    "(world_size=6, worker_count=4, timeout=0:30:00)\n"
    "02/21/2022 13:46:15 - INFO - torch.distributed.distributed_c10d -   Rank 0: Completed "
    "store-based barrier for key:store_based_barrier_key:1 with 6 nodes.\n"
)
BARRIER_TIMEOUT = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 49, in main\n'
    "    accelerator = Accelerator()\n"
    '  File "/opt/conda/lib/python3.7/site-packages/torch/distributed/distributed_c10d.py", '
    "line 547, in init_process_group\n"
    "    _store_based_barrier(rank, store, timeout)\n"
    '  File "/opt/conda/lib/python3.7/site-packages/torch/distributed/distributed_c10d.py", '
    "line 222, in _store_based_barrier\n"
    "    rank, store_key, world_size, worker_count, timeout))\n"
    "RuntimeError: Timed out initializing process group in store based barrier on rank: 0, "
    "for key: store_based_barrier_key:1 (world_size=8, worker_count=16, timeout=0:30:00)\n"
)
LIGHTNING_TWICE = (
    "initializing ddp: GLOBAL_RANK: 1, MEMBER: 2/8\ninitializing ddp: GLOBAL_RANK: 1, MEMBER: 2/8\n"
)
VLLM_QUEUE = (
    "INFO 08-13 11:26:00 [loggers.py:123] Engine 000: Avg prompt throughput: 900.0 tokens/s, "
    "Avg generation throughput: 3000.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV "
    "cache usage: 40.0%, Prefix cache hit rate: 10.0%\n"
    "INFO 08-13 11:27:02 [shm_broadcast.py:802] No available shared memory broadcast block "
    "found in 60 seconds. This typically happens when some processes are hanging or doing "
    "some time-consuming work (e.g. compilation)\n"
)

#: vLLM's offline bar (`LLM.generate`'s tqdm) short of its total -- the engine serves -- then
#: its queue's warning, then the bar advancing: the wait ended. All in one read of the output
#: (`cat`): the wait is dated as its line is read, before the advance that ends it.
OFFLINE_GOES_ON = (
    "Processed prompts:  50%|█████     | 2/4 [00:10<00:10,  5.00s/it]\n"
    + VLLM_QUEUE.splitlines(keepends=True)[1]
    + "Processed prompts:  75%|███████▌  | 3/4 [01:15<00:30, 30.00s/it]\n"
)

#: vLLM V0's stats line (vllm/engine/metrics.py `LoggingStatLogger.log`), as vllm#12795's
#: CPU-mode engine wrote it every 31 s (corpus24/dev): one request runs, no token comes, for
#: two and a half minutes by the lines' own clock -- the engine's stall the console ends inside
#: (`stalls.Waits.stalled_engines`).
V0_STALL = "".join(
    f"INFO 02-06 00:{t // 60:02d}:{t % 60:02d} metrics.py:467] Avg prompt throughput: 0.0 "
    "tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 1 reqs, Swapped: 0 reqs, "
    "Pending: 0 reqs, GPU KV cache usage: 0.1%, CPU KV cache usage: 0.0%.\n"
    for t in range(2443, 2443 + 31 * 6, 31)
)
