"""Waits a framework declares in its console, read as ranks' phases (`rank.status`).

Some frameworks say themselves that ranks wait on others, and for how long at least:

- Horovod's stall inspector (horovod/common/stall_inspector.cc, 0.18 on; before it the same
  check in horovod/common/operations.cc): when a tensor was submitted by some ranks and not
  by the rest for more than the stall-check time N (`HOROVOD_STALL_CHECK_TIME_SECONDS`,
  default 60), it warns "One or more tensors were submitted to be reduced, gathered or
  broadcasted by subset of ranks and are waiting for remainder of ranks for more than N
  seconds ...", then lists the ranks: `Stalled ranks:` / `Missing ranks:` and one
  `R: [tensor, ...]` line per rank that did not submit (`R!:` past the shutdown time), or
  (0.13-0.16) one `tensor [missing ranks: R, ...]` per op, or (0.9-0.12) `tensor [ready
  ranks: R, ...]` on the warning's own line. It checks again only after another N seconds
  (`ShouldPerformCheck`), so the k-th warning of a stall that no progress interrupted shows
  a wait of more than k * N seconds; its shutdown line ("is stalled for longer than M
  seconds. Will shutdown.") shows M. Only the coordinator checks (controller.cc
  `is_coordinator_`), but a warning whose list a paste cut names no rank and declares no
  wait: Horovod warns so routinely while ranks catch up (uneven batches, a slow start), and a
  held-out healthy console ends in one (the eleventh session's measurement). The other way
  round, an op's item (`tensor [ready ranks: ...]`, `[missing ranks: ...]`) whose warning a
  paste cut is read as its warning's: Horovod writes one under its warning alone, so its
  ranks waited the stall-check time, 60 s unless set.
- torch's store-based barrier in `init_process_group` (torch/distributed/distributed_c10d.py
  `_store_based_barrier`, 1.8-2.x): "Waiting in store based barrier to initialize process
  group for rank: R, key: K (world_size=W, worker_count=J, timeout=T)" (2.x:
  `num_workers_joined=J`; 2.2 on at DEBUG, with "for S seconds" before `rank:`), written
  each time 10 s more passed without every rank joining, so the k-th line of a rank and key
  shows k * 10 s at least; "Rank R: Completed store-based barrier for key:K with W nodes."
  (in its first releases "... for W nodes.", no key) ends it: every rank joined.

- SGLang's scheduler watchdog (python/sglang/srt/managers/scheduler.py `watchdog_thread`, 0.3
  on): while a batch is running and no forward pass completed for more than its
  `watchdog_timeout` (`--watchdog-timeout`, default 300), it logs "Watchdog timeout
  (self.watchdog_timeout=T)" -- before it (0.4.6 on; after it before) the batch's
  `self.cur_batch.batch_size()=N` -- and kills the server. 0.5.x moved it to
  python/sglang/srt/utils/watchdog.py (0.5.23 wheel read): "Scheduler watchdog timeout
  (self.watchdog_timeout=T, self.soft=False)" (the scheduler's forward counter frozen; also the
  TokenizerManager's, DetokenizerManager's, DataParallelController's), SIGQUIT to its parent
  unless `soft`. Read as the engine's snapshot: N running where said before, else one (the
  watchdog looks only while a batch runs), no tokens, stalled for T s (`inference.stats`'
  `stalled_since`); its `waiting` is not said (0).

- XLA's rendezvous (xla/service/rendezvous.cc `AwaitAndLogIfStuck`, JAX's and TensorFlow's
  collectives on GPU/TPU): when the threads of a collective's participants have not all joined
  after its warn timeout, each waiting one logs at ERROR "This thread has been waiting for
  `NAME` for N seconds and may be stuck. Expected K threads to join the rendezvous, but not all
  of them arrived on time." -- NAME says what for (`initialize clique for rank 6;
  clique=devices=[0,...,15]; ...`, `Acquire clique: devices=4:[1,2,3,5]; ...`); "Thread is
  unstuck! Warning above was a false-positive." ends it; after its terminate timeout,
  "Termination timeout for `NAME` ... Exiting ..." and `std::exit(42)` (a death: the
  catalogue's). Read as the rank NAME or the launcher's prefix names (else the console's one
  process, 0) waiting N s in `xla_rendezvous`, of as many ranks as NAME's devices. Its older
  copy (xla/service/collective_ops_utils.h `WaitAndLogIfStuck`, TensorFlow's tree before
  openxla, JAX's jaxlib of 2020-2023): after 5000 ms, "This thread has been waiting for 5000ms
  for and may be stuck: DESC" -- DESC `participant for device ordinal 1, stream 0x...` or
  `participant AllReduceParticipantData{rank=27, ... global_devices=[0,...,31] ...}` -- then it
  waits on, and "Thread is unstuck! ..." ends it: the same wait, the rank the ordinal or
  `rank=` names.

- TensorFlow's master creating a distributed session (tensorflow/core/distributed_runtime/
  master.cc `DeviceFinder::Wait`, 1.x and 2.x's distributed runtime): while some tasks of the
  cluster have not answered, every `kLoggingPeriodMs` (10 s) it logs "CreateSession still
  waiting for response from worker: /job:J/replica:0/task:T" for each of them -- its TODO
  says it never times out -- so the k-th line naming a task shows k * 10 s at least; "Start
  master session ..." (master_session.cc) after it says every task answered. A task named
  once is one still starting; named again, the console shows the wait going on: read as the
  console's process (the launcher's prefix's rank, else 0) waiting in `tf_create_session`.

- vLLM's Ray executor waiting for its workers' placement group (vllm/executor/ray_utils.py
  `_wait_until_pg_ready`, copied by RL frameworks that place vLLM themselves): while Ray has
  not placed every bundle, it logs "Waiting for creating a placement group of specs for N
  seconds. specs=[...]" after 10 s, then at doubling intervals (30, 70, 150, ... s), N the
  seconds waited, and raises after PG_WAIT_TIMEOUT (1800 s). From its second line (N > 10)
  the console shows the wait going on: the engine (the launcher's prefix's rank, else 0)
  waits in `ray_placement_group`, N s.

- Lightning's process-group rendezvous (lightning_fabric/utilities/distributed.py
  `_init_dist_connection`, and before it pytorch_lightning's DDP accelerators): each rank logs
  "Initializing distributed: GLOBAL_RANK: R, MEMBER: R+1/W" (1.0-1.2: "initializing ddp: ...")
  and blocks in `torch.distributed.init_process_group` until all W joined; then rank 0 alone
  logs "All distributed processes registered. Starting with W processes" (1.0-1.2: "All DDP
  processes registered. Starting ddp with W processes"). A console that merely ends after
  ranks entered declares nothing (a paste cut at start-up; another node's console never hears
  the group form): but a global rank entering twice before the banner -- two processes
  claiming one rank, two nodes that both took themselves for the first -- is a group that
  cannot form, and the ranks seen entering wait in `process_group_init`, 0 s each.

- torch's flight-recorder analyzer (`torchfrtrace`, torch/distributed/flight_recorder/
  components/utils.py `error_analysis` and types.py `EntryState.log`, torch 2.7 on; before it
  tools/flight_recorder/components/builder.py in the repository), run on the ranks' dumps of a
  job that hung: "Not all ranks joining collective, sequence number: N" (its first copy: "...
  collective N at entry M"), then one `key: value` line a field -- `collective: nccl:OP`,
  `missing ranks: {R, ...}`, `world size: W`, `expected ranks: {R, ...}` (its first copy: the
  count) -- or, in the oldest, all on its own line (`... collective nccl:OP  Missing ranks are
  {R, ...}`). The ranks that joined wait in OP for the missing ones: read as the joined ranks
  in OP's phase and the missing in `OP_not_joined`, declared with no duration (the dumps
  say where the ranks stood, not since when).

- A stack dump that shows a process waiting in a collective: py-spy's (`py-spy dump`, src/dump.rs:
  `Thread N (active): "MainThread"`, then one `    function (path:line)` a frame, innermost
  first; `--native` puts C frames among them) and CPython's faulthandler's after its timeout
  (`faulthandler.dump_traceback_later`, Modules/faulthandler.c: `Timeout (H:MM:SS)!`, then
  `Thread 0x... (most recent call first):` and `  File "path", line N in function`, innermost
  first) -- a program's own watchdog saying it waited that long. A thread whose innermost
  Python frame is a collective's (torch.distributed's c10d and functional collectives,
  DeepSpeed's comm, Horovod's ops, vLLM's and SGLang's device communicators -- but not
  vLLM's message queue, where an engine's worker waits for its next batch) waits in it: its
  process is a rank in the phase of that function, waited 0 s (py-spy's is a snapshot) or the
  timeout. The rank is the launcher's prefix's when it names one, else the order in which
  the dump shows the process (a thread of py-spy's, a timeout dump of faulthandler's): a dump
  names processes, not ranks. A main thread py-spy says is idle (blocked in the kernel), its
  innermost Python frame a call that returns only when another thread, process or machine
  acts (`_BLOCKING`: a lock file, an event, a future, a child process, Ray's get), waits there
  too, in the phase `function (path)`; other threads idle so are helpers between work, and a
  main thread in an event loop's select is a server between requests. faulthandler's dump
  made on request (`dump_traceback()`, a `register`ed signal; no timeout before it) marks the
  thread it was asked from, `Current thread 0x...`: blocked so, it waits too (after a `Fatal
  Python error` the dumps are a crash's stacks).

- vLLM's shared-memory message queue (vllm/distributed/device_communicators/shm_broadcast.py,
  `acquire_write` / `acquire_read`, 0.5 on; at DEBUG to 0.9, at INFO since, with "This
  typically happens when some processes are hanging or doing some time-consuming work (e.g.
  compilation)"): "No available shared memory broadcast block found in N seconds", the k-th
  time after k * N seconds (VLLM_RINGBUFFER_WARNING_INTERVAL, 60) of one wait of the engine
  for its workers or theirs for it (an idle worker's dequeue is `indefinite`: it says none).
  Once the engine serves -- an offline `Processed prompts` bar short of its total, or stats
  with requests running -- its workers stopped answering a batch: read as the engine's
  snapshot, the pending requests running (one where nothing says), no tokens, stalled for
  k * N s. After stats that say it runs none, its workers wait for work (the versions and
  executors whose idle dequeue warns). Before anything says either it is no stall: a
  start-up's compilation, profile run or weights loading, as its own words say (a held-out
  healthy start-up said it for minutes, the eleventh session's measurement).

- Ray's autoscaler finding a request no node type can fulfill (ray 2.60.0 wheel:
  autoscaler/_private/autoscaler.py, "Error: No available node types can fulfill resource
  request {...}. Add suitable node types to this cluster to resolve this issue.", every 30 s;
  autoscaler/v2/event_logger.py, "... resource requests ..." and "... placement group requests
  ..."): the work that asked for it cannot be placed on any node this cluster may ever have --
  it waits until someone changes the cluster. The autoscaler's own log (`monitor.log`, a
  KubeRay or operator autoscaler container's) says it in the resource demand scheduler's words
  (ray-project/ray : autoscaler/_private/resource_demand_scheduler.py, `get_nodes_for`, "Give
  up, no feasible node": "The autoscaler could not find a node type to satisfy the request:
  [...]", each update); a request for a placement group's bundle resources (`GPU_group_0_<id>`)
  is none, as the later copies leave it unsaid and the older say it "will resolve itself".
  Read as the console's process (the launcher's prefix's rank, else 0) waiting in
  `ray_infeasible_request`, declared with no duration.

Any other wait, by the grammar of a console rather than one framework's words (`_generic`): a
line that says something waits, is stuck, stalls, hangs, is blocked, retries, is not yet ready
(or listening, up, ...), is still scheduling (or starting, ...), is taking more than a while,
has not started, or says no trial (worker, ...) is running -- the verb; not a key of a metric,
`Waiting: 0 reqs` -- and that is no timeout or failure (those are the collectives' and the
catalogue's), no code (a frame `in wait`) and no server idle for its next request, job, task or
connection, is a wait of its process once the console shows it lasting a minute
(`GENERIC_LASTED`): the wait it states (`for|than|after|over|since|in the last N s|min|ms|h`),
plus the time between the first and the latest line of the same wait by the clock they print
(`HH:MM:SS`); a wait said `GENERIC_UNTIMED` times in a row by lines that print no clock counts
as one too (a retry's line saying it is the k-th attempt, `(attempt 60/60, ...)`, says it k
times: the paste may have kept its last line alone). A wait of seconds -- a shard loading, a
connect retried twice -- is no stall, and a number that changes between its lines (a checkpoint
12, then 13) is one wait ended and the next begun (an attempt's count, outside the wait's
clause, is none). Its phase is the line's own words (`Waiting for output from MQLLMEngine`:
vLLM V0's client polling its engine at DEBUG each 10 s, vllm/engine/multiprocessing/client.py
-- an idle engine says between those lines, at the same level and period, `Waiting for new
requests in engine loop`, a server idle for its next request, which ends the wait; a busy one
says nothing). Unlike a framework's own wait, whose end that framework writes, such a wait ends
with the next line that is no wait (an indented line, the code Python's warnings show under
theirs, is none, nor a paste's `...` for lines left out): only a console that ends in it (or
one that says nothing more, live) hung there.

Some such waits a framework's source writes in words of its own -- no verb of the grammar, or
a failure's words for an attempt it retries: the catalogue of declared waits
(emitters/waits.toml, loaded by `waits.py`) names each with its framework, versions, source
path, who waits, the phase it is read in and how long one line shows it lasting (Ray's
autoscaler's request pending a minute while actors hold the cluster, Ray Data finding no CPU
free, Ray Serve's replicas not scheduled, Ray Tune's trials all pending,
TensorFlow's TPU master not ready). The framework writes such a line only once the wait is
long, so it is a wait from its first line (or once it lasted as long as its entry says); it
ends as the grammar's do, except that the wait's own lines between its repeats (`also`: a
retry's count, a status block's rows) end nothing.

A rank that waits is reported in the wait's phase; a rank Horovod names as not having
submitted, in `..._not_submitted`; ranks never named are the rule's "never heard from". The
events carry `waited` (seconds the line shows), not `since`: the time of a line is its
reader's to say (`runwatch diagnose`: the line's timestamp; `runwatch watch`: the clock when
it is read), and `since` is that time minus `waited`, the earliest any line of the same wait
showed (`Waits.since`). Progress after a wait (a step, a bar's advance, the barrier's
completion) ends it: every rank reported leaves it as `exited` -- the rule's "nothing is
waiting" -- so the console's later silence is no rank's stall (`stuck_progress` says that).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from runwatch.emitters.logparse import notes
from runwatch.emitters.tracebacks import DUMP_C_WORDS, DUMP_HEAD
from runwatch.emitters.waits import DECLARED, Wait

Found = tuple[str, dict[str, Any]]

#: vLLM's message queue's words for a wait on its peers (`shm_broadcast.py`)
SHM = "No available shared memory broadcast block found"
_SHM_WAIT = re.compile(SHM + r" ?in (?P<n>\d+(?:\.\d+)?) seconds?")
#: why such a line before the engine served is no stall (`runwatch diagnose`'s note)
SHM_BEFORE_SERVING = (
    "vLLM's shared-memory queue waited before the engine was seen serving a request: its own "
    "words say compilation, a profile run or weights loading wait so too -- a stall once the "
    "engine has served (its stats lines, or a bar's pending prompts)"
)
#: Ray's autoscaler: a resource request no node type can fulfill (`autoscaler.py`, v2's
#: `event_logger.py`)
RAY_INFEASIBLE = "No available node types can fulfill"
#: ... and the resource demand scheduler's, in the autoscaler's own log (`monitor.log`, the
#: operator's or KubeRay's autoscaler container): `resource_demand_scheduler.py`'s `get_nodes_for`
RAY_NO_NODE_TYPE = "could not find a node type to satisfy the request"
RAY_PENDING = "ray_infeasible_request"
#: a placement group's bundle resource (`CPU_group_<id>`, `GPU_group_0_<id>`): a request for one
#: is the group's, which Ray's older scheduler warns of while the group is still being created
#: (it "will resolve itself", its own words) and its later one leaves unsaid
_RAY_PG_RESOURCE = re.compile(r"'\w+_group_(?:\d+_)?[0-9a-f]{8,}'")
#: the bar of vLLM's offline `LLM.generate` (entrypoints/llm.py `_run_engine`)
SERVING_BAR = "Processed prompts"
#: XLA's rendezvous's words for a wait on the other participants (`rendezvous.cc`), and its end
XLA_STUCK = "seconds and may be stuck. Expected"
XLA_STUCK_MS = "ms for and may be stuck: "
XLA_UNSTUCK = "Thread is unstuck!"
XLA = "xla_rendezvous"
_XLA_WAIT = re.compile(
    r"This thread has been waiting for `(?P<name>[^`]*)` for (?P<n>\d+) seconds and may be "
    r"stuck\. Expected (?P<k>\d+) threads"
)
_XLA_RANK = re.compile(r"\bfor rank (?P<rank>\d+)\b")
#: (the older copy's key names them `global_devices=[...]`)
_XLA_DEVICES = re.compile(r"(?:\b|(?<=global_))devices=(?:\d+:)?\[(?P<devices>[\d,\s]*)\]")
#: ... and in its older copy (collective_ops_utils.h), the wait in ms, the rank by ordinal or key
_XLA_WAIT_MS = re.compile(r"This thread has been waiting for (?P<ms>\d+)ms for and may be stuck: ")
_XLA_PARTICIPANT = re.compile(r"\b(?:device ordinal |rank=)(?P<rank>\d+)\b")
#: TensorFlow's master waiting for a task's answer to create a session (`master.cc`), and
#: the session it then starts (`master_session.cc`)
TF_WAITING = "CreateSession still waiting for response from worker: "
TF_STARTED = "Start master session "
TF_SESSION = "tf_create_session"
#: how often TensorFlow's master says it still waits (`DeviceFinder::kLoggingPeriodMs`)
TF_EVERY = 10.0
_TF_TASK = re.compile(re.escape(TF_WAITING) + r"(?P<task>/job:\S+)")
#: vLLM's Ray executor waiting for its placement group (`ray_utils._wait_until_pg_ready`)
PG_WAITING = "Waiting for creating a placement group of specs for "
PG_WAIT = "ray_placement_group"
_PG_WAIT = re.compile(re.escape(PG_WAITING) + r"(?P<n>\d+) seconds")
#: its first line comes after one interval (10 s): a group still being placed
_PG_FIRST = 10.0
#: Lightning's rendezvous: a rank entering it, and rank 0's words once every rank joined
PL_MARKERS = ("GLOBAL_RANK: ", "processes registered. Starting")
PL_INIT = "process_group_init"
_PL_MEMBER = re.compile(
    r"(?i:initializing (?:distributed|ddp)): GLOBAL_RANK: (?P<rank>\d+), MEMBER: \d+/(?P<w>\d+)"
)
_PL_REGISTERED = re.compile(r"All (?:distributed|DDP) processes registered\. Starting")
#: CPython's words before faulthandler's dump of a crash (no wait: a death, the catalogue's)
_FATAL = "Fatal Python error"
#: the pieces of a stack dump's thread headers, and of faulthandler's timeout line
DUMP_MARKERS = ('(active): "', '(idle): "', '(active+gil): "', '(idle+gil): "', '(gil): "',
                "(most recent call first):", "Timeout (", _FATAL, "#0  ", "received signal SIG",
                "terminated with signal SIG")  # fmt: skip
#: a wait by a console's grammar (`_generic`): its verb, not a metric's key (`Waiting: 0`)
_WAIT_VERB = re.compile(
    r"(?i)\b(?:(?P<retry>retr(?:y|ies|ying))|wait(?:s|ing|ed)?|stuck|stall(?:s|ed|ing)?"
    r"|hang(?:s|ing)?|hung|blocked|no progress|not responding|unresponsive|not yet (?:ready"
    r"|listening|available|up|started|connected|initiali[sz]ed)|still (?:scheduling|pending"
    r"|initiali[sz]ing|starting|loading|connecting)|tak(?:ing|en) (?:more|longer) than"
    r"|cannot be scheduled|(?:has|have) not (?:yet )?(?:started|begun|progressed)"
    r"|no [\w-]+ (?:is|are) running)\b(?!\s*[:=]\s*\d)"
)
#: ... and what makes such a line no stall: a timeout or failure (read by the collectives
#: and the catalogue; a watchdog's or heartbeat monitor's line is a collective's), code (a
#: traceback's frame `in wait`, a call `.wait(`), a server idle for its next piece of work
_NO_STALL = re.compile(
    r"(?i)time[d ]?\s?out|timeout|error|exception|fail|abort|kill|fatal|terminat|watchdog"
    r"|heartbeat|\bFile \"|\bin wait\b|wait\("
    r"|\b(?:for|on) (?:the |a )?(?:new |next |incoming |more )?"
    r"(?:requests?|work|jobs?|tasks?|connections?|clients?|input|messages?|commands?)\b"
)
#: a duration's units as consoles write them (`_seconds` scales them)
_UNITS = r"ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?"
#: how long a wait line says its wait has lasted (not a retry's `in N s`: its next attempt)
_LASTED = re.compile(
    r"(?i)\b(?:for|than|after|over|since|(?:in|within) the (?:last|past))\s+"
    rf"(?:more than\s+|over\s+|at least\s+|about\s+)?(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>{_UNITS})\b"
)
#: ... or the time it says has elapsed (`elapsed: 120s`, `90 s elapsed`, `30 s so far`),
#: wherever in the line (a retry's too: no next attempt's interval)
ELAPSED = re.compile(
    rf"(?i)\b(?:time )?elapsed(?: time)?(?:\s*[:=])?\s+(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>{_UNITS})\b"
    rf"|(?P<n2>\b\d+(?:\.\d+)?)\s*(?P<unit2>{_UNITS}) (?:elapsed|so far)\b"
)
#: a duration a wait plans rather than shows: after `will`/`to` ..., before `before|until|then`
_PLANNED = re.compile(r"(?i)\b(?:will|shall|to)\s+(?:\w+\s+){0,2}\w*\s*$")
_THEN = re.compile(r"(?i)\s+(?:before|until|then)\b")
#: a clock that goes back between two lines of one wait by less than this much went back
#: (lines out of order), not past midnight: no time passed
_BACKWARDS = 43200.0
#: a line's clock (its log prefix's time of day): how far apart two lines of one wait are --
#: a time of day, its hour below 24 (a duration past a day, tqdm's `[36:34:36<00:10` elapsed,
#: is none); or the time since the job began that Ray's driver puts on its autoscaler's lines
#: (`_private/worker.py` print_worker_logs: `(autoscaler +15m30s)`, `time_string`; an older
#: driver's `(scheduler +4m44s)`)
_CLOCK = re.compile(
    r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d):([0-5]\d|60)(?![\d:])"
    r"|\((?:autoscaler|scheduler) \+(?:(\d{1,6})h)?(?:(\d{1,2})m)?(\d{1,2})s\)"
)
#: kinds that say the job went on: an engine's stall its stats began to say before one of
#: these is no stall the output ended inside (`Waits.stalled_engines`)
WENT_ON = frozenset({"progress", "step.metrics", "step.done", "reward"})
#: a wait the console shows lasting this long (seconds) is a stall; shorter ones are a pause
GENERIC_LASTED = 60.0
#: ... or one said this many times in a row by lines that print no clock
GENERIC_UNTIMED = 5
#: a retry's count of its attempts after its verb (`retrying... (attempt 60/60, ...)`, `[Retry
#: 1/5]`, `retry #7`): the k-th attempt's line stands for the k lines of the same wait that
#: came before it, whether or not the paste kept them
_ATTEMPT = re.compile(r"(?i)\b(?:attempt|retry|try)\s*#?\s*(?P<k>\d{1,6})\b(?!\.\d)")
#: where a wait's clause starts and ends: a sentence's end, brackets, a bar, `: ` and ` -- `
_STOPS = re.compile(r"[;()\[\]{}|]|\.(?=\s|$)|: | --? ")
_DIGITS = re.compile(r"\d+")
#: a line that is only a paste's mark for lines left out (`...`, `…`, `[...]`)
_ELIDED = re.compile(r"^\s*\[?(?:\.{3,}|…)\]?\s*$")
#: ... or the fence a paste opens or closes its block with (markdown's ```` ``` ```` or `~~~`,
#: a language after it): the paste's, not the console's -- no line of the job's
_FENCE = re.compile(r"^\s*(?:`{3,}|~{3,})[\w+-]*\s*$")
#: a duration in a wait's words (left out of its phase: the same wait, said later, is one)
_DURATION = re.compile(rf"(?i)\b\d+(?:\.\d+)?\s*(?:{_UNITS})\b")
#: the scanner's markers of such a line (literal, case by case)
WAIT_MARKERS = ("wait", "Wait", "WAIT", "stuck", "Stuck", "stall", "Stall", "hang", "Hang",
                "hung", "blocked", "Blocked", "no progress", "No progress", "not responding",
                "unresponsive", "etry", "etri", "not yet ", "still ", "Still ",
                "more than", "longer than", "cannot be scheduled", "not started",
                "not yet started", "not begun", "not progressed", " is running",
                " are running", *DECLARED.markers)  # fmt: skip
#: torch's flight-recorder analyzer's verdict (module docstring), its fields, its oldest form
FR_HEAD = "Not all ranks joining collective"
_FR_FIELD = re.compile(
    r"^\s*(?P<key>collective stack trace|collective state|collective|missing ranks|world size"
    r"|expected ranks|group info|internal record id|input sizes|output sizes"
    r"|total (?:input|output) numel|error msg)\s*:\s*(?P<value>.*?)\s*$"
)
_FR_ONE_LINE = re.compile(r"collective (?P<op>\S+)\s+Missing ranks are \{(?P<ranks>[\d,\s]*)\}")
_FR_SET = re.compile(r"^\{(?P<ranks>[\d,\s]*)\}$")
#: literal pieces a line must hold for `read` to look at it (the scanner's markers)
MARKERS = ("ranks for more than", "missing ranks:", "ready ranks:", "Stalled ranks:",
           "Missing ranks:", "stalled for longer than", "store based barrier",
           "store-based barrier", "Watchdog timeout (", "watchdog timeout (", "batch_size()=", SHM,
           XLA_STUCK, XLA_STUCK_MS, XLA_UNSTUCK, TF_WAITING, TF_STARTED, *PL_MARKERS, PG_WAITING,
           RAY_INFEASIBLE, RAY_NO_NODE_TYPE, FR_HEAD,
           *DUMP_MARKERS)  # fmt: skip
HOROVOD = "horovod_collective"
HOROVOD_MISSING = "horovod_collective_not_submitted"
#: Horovod's stall-check time by default (`HOROVOD_STALL_CHECK_TIME_SECONDS`; before 0.17 the
#: fixed `STALL_WARNING_TIME`, 60 s)
HOROVOD_STALL_S = 60.0
BARRIER = "store_based_barrier"
#: torch writes a waiting line each time this much more passed (`_store_based_barrier`)
BARRIER_EVERY = 10.0

_HVD_WARN = re.compile(r"of ranks for more than (?P<n>\d+) seconds")
_HVD_OPS = re.compile(r"\[(?P<which>missing|ready) ranks: ?(?P<ranks>\d+(?:, ?\d+)*)\]")
_HVD_LIST = re.compile(r"(?:Stalled|Missing) ranks:\s*$")
#: (under MPICH's and Intel MPI's `-prepend-rank`, hydra's `[%r] ` before each line, too)
_HVD_RANK = re.compile(r"^\s*(?:\[\d{1,5}\] )?(?P<rank>\d+)!?: \[")
_HVD_SHUTDOWN = re.compile(r"stalled for longer than (?P<m>\d+) seconds")
#: (0.5.x's `utils/watchdog.py`: "{debug_name} watchdog timeout ({self.watchdog_timeout=},
#: {self.soft=})" -- the Scheduler's, the TokenizerManager's, ...; a soft one only says so)
_WATCHDOG = re.compile(
    r"[Ww]atchdog timeout \(self\.watchdog_timeout=(?P<t>\d+(?:\.\d+)?)"
    r"(?:, self\.soft=(?P<soft>True|False))?\)"
)
_BATCH = re.compile(r"self\.cur_batch\.batch_size\(\)=(?P<n>\d+)")
_PYSPY_THREAD = re.compile(
    r"^\s*Thread (?P<id>0x[0-9A-Fa-f]+|\d+) \((?P<state>active|idle|gil|active\+gil|idle\+gil)\):"
    r' "(?P<name>[^"]*)"'
)
#: the calls a program blocks in until another thread, process or machine does something (the
#: innermost Python frame, as `function (path)`): an event's or condition's wait and a
#: thread's join (threading.py), a queue's get, a future's result, a pipe's or process's
#: (multiprocessing, subprocess), a lock file another process holds (torch's JIT build
#: baton, torch/utils/file_baton.py `FileBaton.wait`; the filelock package's `acquire`), Ray's
#: `ray.get` and `ray.wait` on remote work (ray/_private/worker.py: `get_objects` and `wait`
#: call the core worker, in C), a socket's read -- not an event loop's `select`, where a
#: server waits for its next request
_BLOCKING = re.compile(
    r"^(?:(?:wait|_wait_for_tstate_lock|join|acquire) \(threading\.py"
    r"|(?:get|put) \(queue\.py|(?:result|wait) \(concurrent/futures/_base\.py"
    r"|\w+ \(multiprocessing/(?:connection|synchronize|queues|pool|managers|popen_\w+)\.py"
    r"|_?(?:wait|communicate|try_wait) \(subprocess\.py|wait \(torch/utils/file_baton\.py"
    r"|acquire \(filelock/|(?:get_objects|wait) \(ray/_private/worker\.py"
    r"|readinto \(socket\.py)"
)
_PYSPY_FRAME = re.compile(r"^\s+(?P<func>\S+) \((?P<path>[^()]+?)(?::\d+)?\)\s*$")
_FAULT_TIMEOUT = re.compile(r"^\s*Timeout \((?P<h>\d+):(?P<m>\d{2}):(?P<s>\d{2}(?:\.\d+)?)\)!\s*$")
_FAULT_THREAD = re.compile(r"^\s*(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):")
#: faulthandler's header of the thread the dump was made from (Python/traceback.c
#: `_Py_DumpTracebackThreads`: "Current thread 0x... (most recent call first):")
_ASKED = "Current thread 0x"
_FAULT_FRAME = re.compile(r'^\s+File "(?P<path>[^"]+)", line \d+ in (?P<func>\S+)\s*$')
#: gdb's `py-bt` (CPython's Tools/gdb/libpython.py, `PyBacktrace.invoke`: "Traceback (most
#: recent call first):", then `Frame.print_traceback` for each Python-related frame, innermost
#: first: `  File "path", line N, in func` and its source line, or `  <built-in method ...>`
#: for a C function, `  Waiting for the GIL`, `  Garbage-collecting`, `  (unable to read
#: python frame information)`): a debugger's look at a living process -- Python's own report
#: of an exception says "most recent call last", and faulthandler's frames have no comma
_GDB_HEAD = re.compile(rf"^\s*{re.escape(DUMP_HEAD)}\s*$")
_GDB_FRAME = re.compile(
    rf'^\s+(?:File "(?P<path>[^"]+)", line \d+, in (?P<func>\S+)|{DUMP_C_WORDS})\s*$'
)
#: gdb's `bt` of a native process (gdb/stack.c print_frame: `#N  `, the frame's pc `0x... in `
#: unless it is at a line's start, the function, ` (args)`, then ` at FILE:LINE` or ` from LIB`;
#: a long one wrapped, its rest indented on the next line), innermost first: `#0  ` begins a
#: thread's stack (`thread apply all bt` prints one after another)
#: (a quote's marks left before it, under a launcher's prefix that came first, are margin)
_NATIVE_FRAME = re.compile(r"^[\s>]*#(?P<n>\d+)\s+(?:0x[0-9a-fA-F]+ in )?(?P<func>[^\s(]+) \(")
_NATIVE_REST = re.compile(r"^\s+(?:at \S+:\d+|from \S+)\s*$")
#: where a waiting thread is parked, its innermost frame: sleeping, polling, on a futex or a
#: condition, or spinning in a progress engine (Open MPI's opal_progress, UCX's) -- not a
#: crash's frame (raise, abort, the faulting function); MPICH's engine in its own case
#: (`MPIDI_CH3I_Progress`)
_PARKED = re.compile(
    r"^(?:__GI_|__libc_|__)*(?:nanosleep|usleep|sleep|clock_nanosleep|poll|ppoll|epoll_p?wait"
    r"|p?select|sched_yield|pthread_cond_(?:timed|clock)?wait(?:@\S*)?|futex_\w*wait\w*"
    r"|lll_lock_wait\w*|sem_(?:timed|clock)?wait|syscall|recv(?:msg|from)?|read|accept4?"
    r"|(?i:\w*_progress\w*|\w*progress))$"
)
#: the collectives, fences and barriers of the native stacks (innermost first, the first such
#: frame names the wait): PMIx's fence (openpmix src/client/pmix_client_fence.c `PMIx_Fence`;
#: Open MPI renames its embedded copy's symbols, `OPAL_PMIX_PMIX1XX_PMIx_Fence`), PMI-1/2's
#: barrier and fence, MPI's collectives and the calls that hold one (MPI_Init's modex fence,
#: MPI_Finalize's, a communicator's creation) in their P-profiling names too, and MPI 4's
#: large-count bindings (`PMPI_Bcast_c`, MPICH 4's mpi4py calls them), NCCL's API (its
#: communicator's bootstrap included): a thread parked under one waits for the other ranks
_NATIVE_COLLECTIVE = re.compile(
    r"(?:^|_)(?P<name>PMIx_Fence(?:_nb)?|PMI2?_(?:KVS_)?(?:Barrier|Fence)"
    r"|P?MPI_(?:I?barrier|Barrier|I?allreduce|Allreduce|Reduce(?:_scatter(?:_block)?)?|Bcast"
    r"|Allgatherv?|Alltoall[vw]?|Gatherv?|Scatterv?|Scan|Exscan|Win_fence|Comm_(?:split|dup"
    r"|create)|Init(?:_thread)?|Finalize)(?:_c)?"
    r"|nccl(?:AllReduce|AllGather|ReduceScatter|Broadcast|Bcast|Reduce|GroupEnd"
    r"|CommInitRank\w*|CommInitAll))$"
)
#: a native stack deeper than this is read no further for a collective
_NATIVE_DEPTH = 40
#: the signals a debugger stops a process with to look at it (a person's Ctrl-C at gdb, a
#: breakpoint): a stack after one of these is a living process's; after any other, a crash's
_LOOKING = frozenset({"SIGINT", "SIGTRAP", "SIGSTOP", "SIGTSTP"})
_SIGNALLED = re.compile(r"(?:received|terminated with) signal (?P<sig>SIG[A-Z0-9]+)")
#: the files whose functions are collectives (a thread whose innermost Python frame is in one
#: waits in it): torch.distributed's, DeepSpeed's comm, Horovod's ops, the engines' own
#: communicators (vLLM's and SGLang's device_communicators) -- not vLLM's message queue among
#: them (shm_broadcast.py): an engine's worker waits there for its next batch, idle or busy
#: ("Healthy idle worker parked waiting for the next batch over shm-broadcast", vllm#41834's
#: dump), and the queue's own warning says when such a wait is long (`_vllm_queue`)
_COLLECTIVE_FILES = re.compile(
    r"torch/distributed/(?:distributed_c10d|_functional_collectives)\.py$|deepspeed/comm/"
    r"|horovod/(?:torch|tensorflow)/|/device_communicators/(?!shm_broadcast\.py$)"
)
#: frames of a dumped thread looked at before its innermost Python frame (`--native` ones)
_DUMP_DEPTH = 40
_BARRIER_WAIT = re.compile(
    r"Waiting in store based barrier to initialize process ?group for "
    r"(?:(?P<secs>\d+(?:\.\d+)?) seconds ?)?rank: (?P<rank>\d+), key: (?P<key>[^\s,]+) "
    r"\(world_size=(?P<world>\d+), (?:worker_count|num_workers_joined)=\d+"
)
#: the barrier's end; its first releases name no key (the torch 1.9-era source read, and
#: pytorch#65022's console of 2021): "Rank R: Completed store-based barrier for W nodes."
_BARRIER_DONE = re.compile(
    r"Rank (?P<rank>\d+): Completed store-based barrier for (?:key: ?(?P<key>\S+) with )?"
    r"(?P<world>\d+) nodes"
)


#: words a duration left hanging at a phase's end
_HANGING = frozenset({"for", "after", "since", "over", "in", "within", "the", "last", "past"})


#: where a frame's path leaves the installation for the package (py-spy shortens most paths
#: so itself; faulthandler and gdb print them whole)
_INSTALLED = re.compile(r"^.*/(?:site-packages|dist-packages|lib/python\d\.\d+)/")


def _tail(path: str) -> str:
    """A frame's path from its package on (`threading.py`, `torch/utils/file_baton.py`)."""
    return _INSTALLED.sub("", path)


def _phase(clause: str) -> str:
    """A wait's phase, its clause's words: no duration, number or address, no preposition
    left hanging at its end."""
    words = [w for w in _DIGITS.sub("", _DURATION.sub(" ", clause)).split()
             if any(c.isalpha() for c in w)]  # fmt: skip
    while words and words[-1].lower() in _HANGING:
        words.pop()
    return " ".join(words)[:80] or "waiting"


def _clock_seconds(clock: re.Match[str]) -> float:
    """The seconds of the day (or of the job, Ray's) `_CLOCK` matched."""
    g = clock.groups()
    h, m, sec = (int(a or b or 0) for a, b in zip(g[:3], g[3:], strict=True))
    return h * 3600.0 + m * 60.0 + sec


def _line_clock(lead: str, line: str, end: int) -> float | None:
    """A line's clock, where `runwatch diagnose` reads its time first (`prefixes.time_places`):
    its prefixes' (`lead`: a collector's RFC 3339, a launcher's `[2024-08-21 03:38:02]`, Open
    MPI's date -- taken off the line before the readers saw it), else one in the line before
    `end` (before its words: a logger's own time)."""
    clock = _CLOCK.search(lead) if lead else None
    if clock is None:
        clock = _CLOCK.search(line, 0, end)
    return None if clock is None else _clock_seconds(clock)


def _fr_op(name: str) -> str:
    """A collective's phase from the flight recorder's name for it (`nccl:all_reduce`)."""
    return name.rpartition(":")[2] or name


def _fr_ranks(value: str) -> frozenset[int] | None:
    """The ranks a flight-recorder field lists as a set (`{3, 4}`), or None."""
    if (m := _FR_SET.match(value.strip())) is None:
        return None
    return frozenset(int(r) for r in m.group("ranks").replace(",", " ").split())


def _lasted(clause: str) -> re.Match[str] | None:
    """The wait a clause says it lasted -- not one it plans (`will wait for 60 s`, `for 600
    seconds before the next attempt`)."""
    lasted = _LASTED.search(clause)
    if lasted is None or _PLANNED.search(clause, 0, lasted.start()) is not None:
        return None
    return None if _THEN.match(clause, lasted.end()) is not None else lasted


def _seconds(lasted: re.Match[str]) -> float:
    """The seconds `_LASTED` matched."""
    n, unit = lasted.group("n", "unit") if lasted.group("n") else lasted.group("n2", "unit2")
    unit = unit.lower()
    scale = (0.001 if unit == "ms" or unit.startswith("milli") else 60.0 if unit[0] == "m"
             else 3600.0 if unit[0] == "h" else 1.0)  # fmt: skip
    return float(n) * scale


class Waits:
    """The waits one console declares (one per output: it keeps what the lines before said)."""

    def __init__(self) -> None:
        self.world = 0  # the most ranks any line named
        self._reported: set[int] = set()  # ranks reported in a wait not ended
        # ... of them, those a framework's reader declared (not only the console's grammar or
        # the catalogue's lines): a generic wait of the same rank ending leaves them waiting
        self._framework: set[int] = set()
        self._since: dict[tuple[int, str], float] = {}  # (rank, phase) -> its wait's start
        self._stated = 0.0  # Horovod's stall-check time, from its latest warning
        self._warnings = 0  # Horovod's warnings since the last progress
        self._named: dict[int, str] = {}  # the ranks the latest warning named, their phase
        self._listing = False  # the lines after `Stalled ranks:` name ranks
        self._barrier: dict[tuple[int, str], int] = {}  # (rank, key) -> its waiting lines
        self._batch: int | None = None  # the running batch SGLang's watchdog dumped
        #: the flight-recorder analyzer's verdict being read: its collective, the ranks it
        #: says are missing (None before its line); None between verdicts
        self._fr: tuple[str | None, frozenset[int] | None] | None = None
        #: the dumped thread whose frames are being read: (its process, frames read, waited,
        #: the frame grammar, whether it is a main thread py-spy found blocked); None between
        #: dumps
        self._dump: tuple[str, int, float, re.Pattern[str], bool] | None = None
        self._timeouts = 0  # faulthandler's timeout dumps seen: each is one process's
        self._dumps = 0  # gdb's `py-bt` dumps seen: each is one process's
        #: the native stack (gdb's `bt`) being read: (its thread, the next frame's number);
        #: None between stacks; and whether the console said a crash's signal (its stacks are
        #: no waits)
        self._native: tuple[str, int] | None = None
        self._natives = 0
        self._crashed = False
        self._timeout: float | None = None  # the timeout of faulthandler's dump being read
        self._dumped: dict[str, int] = {}  # a dumped process -> the rank it stands for
        #: requests an engine was seen serving (an offline bar's pending prompts, the running
        #: requests of its stats), 0 before it serves: vLLM's queue waits count from then
        self._serving = 0
        self._idle = False  # the engine's stats said last that it runs no request
        self._shm = 0  # vLLM's queue's warnings since the last progress
        self._shm_noted = False  # ... whether one before serving was noted (`notes`)
        self._engine_since: float | None = None  # an engine's open wait began (`since`)
        self._engine_open = False  # the engine's wait read last is open (vLLM's queue's)
        self._tf_tasks: dict[str, int] = {}  # a task TensorFlow's master waits on -> its lines
        self._pl_members: dict[int, int] = {}  # rank -> its entries in Lightning's rendezvous
        #: the wait by the console's grammar (`_generic`) each rank says in a row: rank ->
        #: (its words with their numbers but no duration, lines, the first line's clock or
        #: None, the wait it stated); and those reported, (rank, phase)
        self._said: dict[int, tuple[str, int, float | None, float]] = {}
        #: the latest wait `_lasting` read that was not shown lasting long enough yet: (rank,
        #: its words or id, seconds shown, seconds its catalogue entry asks or None for the
        #: grammar's, lines) -- `short_wait` says it when the console ends inside it
        self._short: tuple[int, str, float, float | None, int] | None = None
        #: rank -> the attempts the retry lines of its wait in `_said` count (`_ATTEMPT`)
        self._attempts: dict[int, int] = {}
        #: the last line the grammar read as no wait, and the one just before the wait's latest
        #: line: a loop that prints both each time (`not ready endpoints: [...]` then `server not
        #: ready, wait 3 sec to retry...`) says the first again, word for word, between repeats
        self._plain: str | None = None
        self._companion: str | None = None
        #: the catalogue's wait (`waits.toml`) said last and not ended: its own lines between
        #: its repeats (`also`) neither end it nor start another
        self._declared: Wait | None = None
        self._ran: float | None = None  # how long the run went on, as a line said last
        self._ran_base = 0.0  # ... when a line said last that its work began (`began`)
        self._generic: set[tuple[int, str]] = set()
        #: ... those the catalogue declared and its lines do not date (`dates = false`): a
        #: framework's wait declared with no duration, not the grammar's (`generic_only`)
        self._undated: set[tuple[int, str]] = set()
        #: an engine's own stats lines that say it stalls: (server, its Ray worker's pid) ->
        #: (the clock of the first of them in a row, of the latest, its snapshot); and those
        #: told (`stalled_engines`)
        self._stats: dict[tuple[Any, Any], tuple[float, float, dict[str, Any]]] = {}
        self._stats_told: set[tuple[Any, Any]] = set()
        #: the prefixes of the line being read (`read`): a collector's or launcher's time
        self._lead = ""
        #: whether the line read last was taken as a rank's or an engine's wait (reported, or
        #: followed until it shows lasting long enough): `runwatch diagnose` notes no other why
        self.took = False
        #: why lines that read as waits gave no event (`LineParser.notes` takes them)
        self.notes = notes()

    @property
    def following(self) -> bool:
        """The next line may go on a Horovod warning's list of ranks, be a frame of a
        dumped thread, or end a wait only the console's grammar declared (whatever it holds)."""
        return (self._listing or self._dump is not None or self._native is not None
                or self._fr is not None or bool(self._said))  # fmt: skip

    def read(self, line: str, rank: int | None = None, lead: str = "") -> list[Found]:
        """The ranks' phases a line declares (`rank`: the one its launcher's prefix names;
        `lead`: the prefixes taken off it, `prefixes.launcher_lead`, where its clock may be)."""
        self._lead = lead
        self.took = False
        if rank is not None:
            self.world = max(self.world, rank + 1)
        if self._listing:
            if (m := _HVD_RANK.match(line)) is not None:
                return self._horovod({int(m.group("rank")): HOROVOD_MISSING})
            if rank is not None and line.startswith("[") and lead.rstrip().endswith(f"{rank}:"):
                return self._horovod({rank: HOROVOD_MISSING})  # (`R: [...]` taken as srun's label)
            self._listing = False
        if self._fr is not None:
            if (field := _FR_FIELD.match(line)) is not None:
                return self._fr_field(field.group("key"), field.group("value"))
            self._fr = None
        if self._dump is not None and (found := self._frame(line, rank)) is not None:
            return found
        if self._native is not None and (found := self._native_frame(line, rank)) is not None:
            return found
        if not any(m in line for m in MARKERS):
            return self._generic_wait(line, rank)
        self.took = True  # (a framework's own wait line: its reader explains it, or the end)
        if any(m in line for m in DUMP_MARKERS):
            return self._dump_head(line)
        if FR_HEAD in line:
            return self._fr_head(line)
        if RAY_INFEASIBLE in line or RAY_NO_NODE_TYPE in line:
            if RAY_NO_NODE_TYPE in line and _RAY_PG_RESOURCE.search(line) is not None:
                return []
            return self._report({rank or 0: RAY_PENDING}, 0.0)
        if "store based barrier" in line or "store-based barrier" in line:
            return self._store_barrier(line)
        if "atchdog timeout (" in line or "batch_size()=" in line:
            return self._sglang(line)
        if SHM in line:
            return self._vllm_queue(line)
        if XLA_STUCK in line or XLA_STUCK_MS in line or XLA_UNSTUCK in line:
            return self._xla(line, rank)
        if TF_WAITING in line or TF_STARTED in line:
            return self._tf_session(line, rank)
        if any(m in line for m in PL_MARKERS):
            return self._lightning(line)
        if PG_WAITING in line:
            m = _PG_WAIT.search(line)
            if m is None or float(m.group("n")) <= _PG_FIRST:
                return []
            return self._report({rank or 0: PG_WAIT}, float(m.group("n")))
        out: list[Found] = []
        if (m := _HVD_WARN.search(line)) is not None:
            self._stated = float(m.group("n"))
            self._warnings += 1
            self._named = {}
        if _HVD_LIST.search(line):
            self._listing = True
        named: dict[int, str] = {}
        for op in _HVD_OPS.finditer(line):
            phase = HOROVOD_MISSING if op.group("which") == "missing" else HOROVOD
            for r in op.group("ranks").split(","):
                named.setdefault(int(r), phase)
        if named:
            out += self._horovod(named, items=True)
        if (m := _HVD_SHUTDOWN.search(line)) is not None and self._named:
            out += self._report(self._named, max(float(m.group("m")), self._waited()))
        return out

    @property
    def hung_since(self) -> float | None:
        """The start of the latest wait the console declared and nothing ended since (its
        ranks' last change of phase, `since`), or None when no declared wait is open: a
        console that ends inside one ended in its hang (`runwatch diagnose`)."""
        return max(self._since.values()) if self._since else None

    @property
    def engine_hung_since(self) -> float | None:
        """When an engine's wait that it declared and nothing ended since began (vLLM's
        queue: `stalled_since`), or None: as `hung_since`, for an engine. SGLang's watchdog
        is no open wait: it kills its server after saying it."""
        return self._engine_since

    def saw(
        self, found: list[Found], line: str = "", src: dict[str, Any] | None = None, lead: str = ""
    ) -> None:
        """What the line's other readers found: an engine serving requests (`_vllm_queue`),
        its own stats saying it stalls (`stalled_engines`: the clock of `line`, under its
        prefixes `lead`, dates them; `src` is the Ray worker it came from), the job going on."""
        if not found:
            return
        if any(kind in WENT_ON for kind, _ in found):
            self._stats.clear()  # the job went on: no engine's stall began before it is open
            self._stats_told.clear()
        for kind, fields in found:
            if kind == "progress" and fields.get("name") == SERVING_BAR:
                total = fields.get("total")
                self._serving = max(total - fields["n"], 0) if total else 1
                self._idle = False
            elif kind == "inference.stats" and "stalled_since" not in fields:
                self._serving = int(fields.get("running") or 0)  # idle: its workers wait for work
                self._idle = not self._serving
                self._engine_since = None  # it reports again: the rule judges what it says
                self._stats_line(fields, src, _line_clock(lead, line, len(line)))

    def _stats_line(
        self, fields: dict[str, Any], src: dict[str, Any] | None, clock: float | None
    ) -> None:
        """An engine's own stats line: whether it says the engine holds requests and makes no
        token (`stalled_engines`), and since which of its lines, by their clock."""
        stalled = ((fields.get("running") or 0) > 0 and fields.get("gen_tokens_per_s") == 0.0
                   and not (fields.get("prompt_tokens_per_s") or 0.0))  # fmt: skip
        server = (fields.get("server"), None if src is None else src.get("pid"))
        began = self._stats.get(server, (None, None, {}))[0]
        if not stalled or clock is None:
            self._stats.pop(server, None)
            self._stats_told.discard(server)  # (its stall ended: a later one is told anew)
            return
        snapshot: dict[str, Any] = {
            k: fields[k] for k in ("server", "running", "waiting") if k in fields
        }
        if src is not None:
            snapshot["src"] = dict(src)
        self._stats[server] = (clock if began is None else began, clock, snapshot)

    def stalled_engines(self) -> list[Found]:
        """The engines whose own stats lines, to their latest, say they hold requests and make
        no token (vLLM V0 writes its line every interval, stalled or not), where those lines
        show it lasting a minute (`GENERIC_LASTED`, the grammar of waits' evidence, from the
        first such line to the last by the clock they print) with nothing going on after
        (a step, a bar, a reward: `WENT_ON`): what the output's end decides (`hangs`) -- it
        ended inside the engine's stall, as inside a wait it declared, and inference_stalled
        decides it (`runwatch diagnose`'s `hang_window`; `runwatch watch` leaves the run
        open). Each engine's snapshot, stalled since its first such line, once; a V1 engine's
        single line at INFO shows no minute."""
        out: list[Found] = []
        for server, (began, last, snapshot) in self._stats.items():
            waited = (last - began) % 86400.0
            if server in self._stats_told or waited < GENERIC_LASTED:
                continue
            self._stats_told.add(server)
            self._engine_open = True
            stats = {"running": 1, "waiting": 0, **snapshot, "gen_tokens_per_s": 0.0,
                     "prompt_tokens_per_s": 0.0, "waited": waited}  # fmt: skip
            out.append(("inference.stats", stats))
        return out

    def progressed(self) -> list[Found]:
        """The console went on (a step, a bar's advance): its waits ended."""
        self._warnings = 0
        self._named = {}
        self._barrier.clear()
        self._tf_tasks.clear()
        self._pl_members.clear()
        self._timeout = None
        self._shm = 0
        self._engine_since = None
        self._said.clear()
        self._attempts.clear()
        self._declared = None
        self._generic.clear()
        self._undated.clear()
        return self._ended()

    def since(self, fields: dict[str, Any], at: float) -> dict[str, Any]:
        """An event read at `at`: its `waited` made `since` (a `rank.status`: the earliest
        start any line of the same wait showed) or `stalled_since` (an engine's snapshot)."""
        waited = fields.pop("waited", None)
        if waited is None:
            return fields
        if "rank" not in fields:
            start = at - waited
            fields["stalled_since"] = start
            if self._engine_open:  # (SGLang's watchdog kills its server: no open wait)
                known = self._engine_since
                self._engine_since = start if known is None else min(known, start)
            return fields
        key = (fields["rank"], fields["phase"])
        start = at - waited
        known = self._since.get(key)
        fields["since"] = self._since[key] = start if known is None else min(known, start)
        return fields

    def _dump_head(self, line: str) -> list[Found]:
        """A stack dump's thread header (its frames follow), or faulthandler's timeout."""
        if (native := _NATIVE_FRAME.match(line)) is not None and native.group("n") == "0":
            return self._native_start(native)
        if (signal := _SIGNALLED.search(line)) is not None:
            self._crashed |= signal.group("sig") not in _LOOKING
            return []
        if _FATAL in line:
            self._timeout = None  # the dumps after it are of a crash's stacks
            self._crashed = True
        elif (m := _FAULT_TIMEOUT.match(line)) is not None:
            self._timeouts += 1
            h, mi, sec = m.group("h", "m", "s")
            self._timeout = int(h) * 3600 + int(mi) * 60 + float(sec)
        elif (m := _PYSPY_THREAD.match(line)) is not None:
            main = m.group("name") == "MainThread" and m.group("state").startswith("idle")
            self._dump = (f"py-spy {m.group('id')}", 0, 0.0, _PYSPY_FRAME, main)
        elif _FAULT_THREAD.match(line) is not None and self._timeout is not None:
            self._dump = (f"timeout {self._timeouts}", 0, self._timeout, _FAULT_FRAME, False)
        elif line.lstrip().startswith(_ASKED) and not self._crashed:
            # (faulthandler's dump asked for -- `dump_traceback()`, a signal `register`ed --
            # marks the thread it was asked from, a program's main thread: blocked, it waits)
            self._dumps += 1
            self._dump = (f"asked {self._dumps}", 0, 0.0, _FAULT_FRAME, True)
        elif _GDB_HEAD.match(line) is not None:
            self._dumps += 1
            self._dump = (f"py-bt {self._dumps}", 0, 0.0, _GDB_FRAME, False)
        return []

    def _frame(self, line: str, rank: int | None) -> list[Found] | None:
        """A frame of the dumped thread being read: at its innermost Python frame, the rank
        waits in a collective or it does not -- the dump's reading of that thread ends (None:
        the line is no frame of it, and is read as any line)."""
        assert self._dump is not None
        process, frames, waited, grammar, blocked = self._dump
        m = grammar.match(line)
        if m is None or frames >= _DUMP_DEPTH:
            self._dump = None
            return None
        path = m.group("path")
        if path is None or not path.endswith(".py"):  # a native frame (`--native`, gdb's C)
            self._dump = (process, frames + 1, waited, grammar, blocked)
            return []
        self._dump = None
        path = path.replace("\\", "/")
        phase = m.group("func")
        if _COLLECTIVE_FILES.search(path) is None:
            # (py-spy's main thread blocked in a call that waits on another's work)
            call = f"{phase} ({_tail(path)})"
            if not blocked or _BLOCKING.match(call) is None:
                return []
            phase = call
        if rank is None:
            rank = self._dumped.setdefault(process, len(self._dumped))
        return self._report({rank: phase}, waited)

    def _native_start(self, frame: re.Match[str]) -> list[Found]:
        """A native stack's innermost frame (gdb's `#0  `): a thread parked there (`_PARKED`)
        may wait in a collective its outer frames name; a crash's stack, or one that works,
        waits in none."""
        self._native = None
        if self._crashed or _PARKED.match(frame.group("func")) is None:
            return []
        self._natives += 1
        self._native = (f"bt {self._natives}", 1)
        return []

    def _native_frame(self, line: str, rank: int | None) -> list[Found] | None:
        """A line of the native stack being read: its next frame (the first that is a
        collective's names the thread's wait, and its reading ends), a wrapped frame's rest,
        or no line of it (None: read as any line)."""
        assert self._native is not None
        thread, n = self._native
        if _NATIVE_REST.match(line) is not None:
            return []
        frame = _NATIVE_FRAME.match(line)
        if frame is None or int(frame.group("n")) != n or n >= _NATIVE_DEPTH:
            self._native = None
            return None
        collective = _NATIVE_COLLECTIVE.search(frame.group("func"))
        if collective is None:
            self._native = (thread, n + 1)
            return []
        self._native = None
        if rank is None:
            rank = self._dumped.setdefault(thread, len(self._dumped))
        return self._report({rank: collective.group("name")}, 0.0)

    def _waited(self) -> float:
        return self._stated * max(self._warnings, 1)

    def _fr_head(self, line: str) -> list[Found]:
        """The flight-recorder analyzer's verdict begins (module docstring); its oldest form
        says the collective and the missing ranks on the same line."""
        self._fr = (None, None)
        if (m := _FR_ONE_LINE.search(line)) is None:
            return []
        self._fr = (_fr_op(m.group("op")), None)
        return self._fr_field("missing ranks", "{" + m.group("ranks") + "}")

    def _fr_field(self, key: str, value: str) -> list[Found]:
        """One field of the verdict: its collective, the missing ranks (reported as not
        joined), then the ranks expected (the others reported waiting in the collective)."""
        assert self._fr is not None
        op, missing = self._fr
        if key == "collective":
            self._fr = (_fr_op(value), missing)
            return []
        phase = op or "collective"
        if key == "missing ranks" and missing is None:
            if (ranks := _fr_ranks(value)) is None:
                return []
            self._fr = (op, ranks)
            return self._report({r: f"{phase}_not_joined" for r in ranks}, 0.0)
        if key in ("world size", "expected ranks") and missing is not None:
            expected = _fr_ranks(value)
            if expected is None and value.isdigit():
                expected = frozenset(range(int(value)))
            if not expected:
                return []
            self._fr = (op, missing | expected)  # (told: the next such field adds none)
            return self._report({r: phase for r in expected - missing}, 0.0)
        return []

    def _horovod(self, named: dict[int, str], items: bool = False) -> list[Found]:
        """Ranks a stall warning's list names. An op's item (`tensor [ready ranks: ...]`,
        `[missing ranks: ...]`) is written under the warning alone (operations.cc,
        controller.cc): one whose warning a paste cut still says its ranks waited the
        stall-check time, its default at least; a rank line (`R: [...]`) needs its list's
        header, and a list with no warning before it is no stall this reader knows."""
        if not self._stated and not items:
            return []
        fresh = {r: p for r, p in named.items() if self._named.get(r) != p}
        self._named.update(fresh)
        return self._report(fresh, self._waited() if self._stated else HOROVOD_STALL_S)

    def _report(self, phases: dict[int, str], waited: float, generic: bool = False) -> list[Found]:
        if not phases:
            return []
        self.world = max(self.world, max(phases) + 1)
        self._reported.update(phases)
        if not generic:
            self._framework.update(phases)
        return [
            ("rank.status", {"rank": r, "world_size": self.world, "phase": p, "waited": waited})
            for r, p in sorted(phases.items())
        ]

    def _store_barrier(self, line: str) -> list[Found]:
        if (m := _BARRIER_WAIT.search(line)) is not None:
            rank, key = int(m.group("rank")), m.group("key")
            self.world = max(self.world, int(m.group("world")))
            seen = self._barrier[rank, key] = self._barrier.get((rank, key), 0) + 1
            secs = m.group("secs")
            waited = float(secs) if secs is not None else BARRIER_EVERY * seen
            return self._report({rank: BARRIER}, waited)
        if (m := _BARRIER_DONE.search(line)) is not None:
            self.world = max(self.world, int(m.group("world")))
            # it completes when every rank joined: the key's waits ended on all ranks (a line
            # that names no key, the barrier's waits)
            key = m.group("key")
            self._barrier = {k: v for k, v in self._barrier.items() if key not in (None, k[1])}
            return self._ended()
        return []

    def _xla(self, line: str, rank: int | None) -> list[Found]:
        """XLA's rendezvous: a rank waiting for the others to join a collective, or the wait's
        end (`Thread is unstuck!`)."""
        if XLA_UNSTUCK in line:
            return self._ended()
        if (old := _XLA_WAIT_MS.search(line)) is not None:  # (its older copy's words)
            desc = line[old.end() :]
            if rank is None:
                named = _XLA_PARTICIPANT.search(desc)
                rank = int(named.group("rank")) if named is not None else 0
            if devices := _XLA_DEVICES.search(desc):
                self.world = max(self.world, len(devices.group("devices").split(",")))
            return self._report({rank: XLA}, int(old.group("ms")) / 1000.0)
        if (m := _XLA_WAIT.search(line)) is None:
            return []
        name = m.group("name")
        if rank is None:
            named = _XLA_RANK.search(name)
            rank = int(named.group("rank")) if named is not None else 0
        if (devices := _XLA_DEVICES.search(name)) is not None:
            self.world = max(self.world, len(devices.group("devices").split(",")))
        return self._report({rank: XLA}, float(m.group("n")))

    def _tf_session(self, line: str, rank: int | None) -> list[Found]:
        """TensorFlow's master waiting on a task to create a session, or the session started
        (`Start master session`): every task answered."""
        if (m := _TF_TASK.search(line)) is None:
            if TF_STARTED in line:
                self._tf_tasks.clear()
                return self._ended()
            return []
        task = m.group("task")
        seen = self._tf_tasks[task] = self._tf_tasks.get(task, 0) + 1
        if seen < 2:
            return []  # one period: a task still starting (the next line says it still is)
        return self._report({rank or 0: TF_SESSION}, TF_EVERY * seen)

    def _lightning(self, line: str) -> list[Found]:
        """A rank entering Lightning's rendezvous, or rank 0 saying the group formed. A global
        rank entering a second time before that -- two processes claiming one rank -- is a
        group that cannot form: every rank seen entering waits in it."""
        if _PL_REGISTERED.search(line) is not None:
            self._pl_members.clear()
            return self._ended()
        if (m := _PL_MEMBER.search(line)) is None:
            return []
        self.world = max(self.world, int(m.group("w")))
        rank = int(m.group("rank"))
        seen = self._pl_members[rank] = self._pl_members.get(rank, 0) + 1
        if seen < 2:
            return []
        fresh = [r for r in sorted(self._pl_members) if r not in self._reported]
        return self._report(dict.fromkeys(fresh, PL_INIT), 0.0)

    def _sglang(self, line: str) -> list[Found]:
        if (m := _BATCH.search(line)) is not None:
            self._batch = int(m.group("n"))
            return []
        if (m := _WATCHDOG.search(line)) is None:
            return []
        # the watchdog kills the server after it (SIGQUIT to its parent), unless it is soft
        self._engine_open = m.group("soft") == "True"
        stats = {"running": max(self._batch or 1, 1), "waiting": 0, "gen_tokens_per_s": 0.0,
                 "prompt_tokens_per_s": 0.0, "waited": float(m.group("t")),
                 "engine": "sglang"}  # fmt: skip
        return [("inference.stats", stats)]

    def _vllm_queue(self, line: str) -> list[Found]:
        m = _SHM_WAIT.search(line)
        if m is None:
            return []
        if self._idle:  # (an idle engine's workers wait for work)
            return self._generic_ended()
        if not self._serving:  # at start-up: compilation, a profile run, weights loading (its
            if not self._shm_noted:  # own words; a held-out healthy start-up said it for
                self.notes.append(SHM_BEFORE_SERVING)  # minutes): said once
                self._shm_noted = True
            return []
        self._shm += 1
        self._engine_open = True
        stats = {"running": self._serving, "waiting": 0, "gen_tokens_per_s": 0.0,
                 "prompt_tokens_per_s": 0.0, "waited": float(m.group("n")) * self._shm,
                 "engine": "vllm"}  # fmt: skip
        return [("inference.stats", stats)]

    def _generic_wait(self, line: str, rank: int | None) -> list[Found]:
        """A wait no framework's reader knows: one the catalogue of declared waits names
        (`waits.toml`), else one by the console's grammar (module docstring). Its rank's
        phase once the console shows it lasting long enough (`GENERIC_LASTED`, or said
        `GENERIC_UNTIMED` times by lines without a clock; the catalogue's as long as its entry
        says); any other line that is not blank, indented or the declared wait's own ends such
        waits."""
        if not line.strip() or self._warnings or self._framework_waits():
            return []  # (inside a framework's own wait: its reader's lines, `Stalled ops:`)
        if _ELIDED.match(line) or _FENCE.match(line):
            return []  # (a paste's mark for lines left out, or its block's fence: no line)
        ran = self._run_time(line)
        if self._ran is not None and DECLARED.began(line):
            self._ran_base = self._ran  # (work began: a later wait counts from now on)
        if (hit := DECLARED.match(line)) is not None:
            wait, m = hit
            stated = wait.seconds(m) if wait.elapsed is None else self._waited_all()
            out = self._lasting(
                line, rank, m.start(), wait.phase, wait.id, stated, wait.lasted, wait.dates
            )
            self._declared = wait  # (after: the wait before it, which this one ended, is gone)
            return out
        if (open_ := self._declared) is not None and open_.also and open_.also.search(line):
            if ran is None or open_.elapsed is None:
                return []  # (the wait's own line between its repeats)
            stated = self._waited_all()
            return self._lasting(line, rank, len(line), open_.phase, open_.id, stated, open_.lasted)
        verb = _WAIT_VERB.search(line)
        if verb is None or _NO_STALL.search(line) is not None:
            self._plain = line if verb is None else None  # (an idle server's line: no loop's)
            if self._said and line == self._companion:
                return []  # (the loop's other line, the same words: nothing moved)
            # (a warning's code under a wait only the grammar read; not a prefix's `: `; a
            # framework's declared wait goes on only in its own lines, `also`: kubectl indents
            # every event row)
            indented = line.startswith(("  ", "\t")) and self._declared is None
            return [] if indented and self._said else self._generic_ended()
        self._companion, self._plain = self._plain, None
        clock = _CLOCK.search(line, 0, verb.start())
        begin = clock.end() if clock is not None else 0  # (the clock is no word of the wait)
        start = max((m.end() for m in _STOPS.finditer(line, begin, verb.start())), default=begin)
        stop = _STOPS.search(line, verb.end())
        clause = line[start : stop.start() if stop else len(line)]
        lasted = None if verb.group("retry") else _lasted(clause)
        lasted = lasted or ELAPSED.search(line)
        stated = 0.0 if lasted is None else _seconds(lasted)
        said = " ".join(_DURATION.sub(" ", clause).split())  # (a number changed: a new wait)
        attempt = _ATTEMPT.search(line, verb.end()) if verb.group("retry") else None
        count = int(attempt.group("k")) if attempt is not None else 0
        return self._lasting(line, rank, verb.start(), _phase(clause), said, stated, count=count)

    def unread(self, line: str) -> None:
        """A line no reader was shown, just before one they are (`runwatch watch`'s scanner):
        the loop's other line before its first wait line, as diagnose reads it."""
        if _WAIT_VERB.search(line) is None:
            self._plain = line

    def _waited_all(self) -> float:
        """How long a wait that lasts its run (the catalogue's `elapsed`) lasted: the run time
        the console said last, less the run time when it last said the work began."""
        return max((self._ran or 0.0) - self._ran_base, 0.0)

    def _run_time(self, line: str) -> float | None:
        """How long the run went on, where the line says so (Tune's status: the catalogue's
        `elapsed`), kept for a wait that lasted all of it."""
        if "running for " not in line and "running time: " not in line:
            return None
        for wait in DECLARED.waits:
            if (ran := wait.ran(line)) is not None:
                self._ran = ran
                return ran
        return None

    def _lasting(
        self,
        line: str,
        rank: int | None,
        at: int,
        phase: str,
        said: str,
        stated: float,
        lasted: float | None = None,
        dates: bool = True,
        count: int = 0,
    ) -> list[Found]:
        """One more line of a rank's wait (`said`: its words, or the catalogue's id; `at`:
        where they start, the line's clock before them): reported once the console shows it
        lasting `lasted` (the grammar's: `GENERIC_LASTED`, or `GENERIC_UNTIMED` lines without
        a clock, `count` the lines a retry's attempt says there were). Another wait of the
        rank's ends the one before. Reported as having waited what the console shows, unless
        what it shows does not date the wait (`dates`: the catalogue's), where the console's
        end decides it."""
        self.took = True
        now = _line_clock(self._lead, line, at)
        who = rank or 0
        out: list[Found] = []
        known, lines, first, first_stated = self._said.get(who, (None, 0, now, stated))
        if known != said:  # another wait of the rank's: the one before ended (progress)
            if known is not None and any(r == who for r, _ in self._generic):
                out = self._generic_ended()
            lines, first, first_stated = 0, now, stated
            self._attempts.pop(who, None)
        lines += 1
        self._said[who] = (said, lines, first, first_stated)
        if count:
            self._attempts[who] = count
        said_times = max(lines, self._attempts.get(who, 0))
        waited = stated
        if first is not None and now is not None:
            gone = (now - first) % 86400.0  # (past midnight)
            waited = max(stated, first_stated + (gone if gone <= _BACKWARDS else 0.0))
        if lasted is None:
            # (lines without a clock, or one line alone: a count its clock cannot show)
            untimed = said_times >= GENERIC_UNTIMED and (
                who in self._attempts or (first is None and now is None)
            )  # (an attempt's count says how often, whatever its lines' clocks show)
            if waited < GENERIC_LASTED and not untimed:
                self._short = (who, said, waited, None, lines)
                return out
        elif waited < lasted:
            self._short = (who, said, waited, lasted, lines)
            return out
        self._short = None
        self._generic.add((who, phase))
        if not dates:
            self._undated.add((who, phase))
        return out + self._report({who: phase}, waited if dates else 0.0, generic=True)

    def short_wait(self) -> str | None:
        """Why a wait the console ended inside raised nothing: it did not show it lasting long
        enough, or Horovod's stall warning named no rank, nor any before it (`runwatch
        diagnose` says it, so a user can tell what it would take)."""
        if self._warnings and not self._named and not self._reported:
            return (f"Horovod's stall inspector warned that ranks waited over "
                    f"{self._stated:.0f} s, but no line after it names them (its `Missing "
                    f"ranks:` list): with no rank named, no rank's wait is reported")  # fmt: skip
        if self._short is None or self._framework_waits():
            return None  # (none; or a framework's wait came after it, which decides)
        who, said, waited, lasted, lines = self._short
        if self._said.get(who, (None,))[0] != said:
            return None  # (ended since: progress, or another wait of the rank's)
        shown = f"shown lasting {waited:.0f} s" + (f" over {lines} lines" if lines > 1 else "")
        if lasted is not None:
            return (f"the console ends inside a wait the catalogue declares ({said}, "
                    f"emitters/waits.toml), {shown}: a stall once shown lasting "
                    f"{lasted:.0f} s")  # fmt: skip
        return (f"the console ends inside a wait ('{said[:60]}'), {shown}: a stall once shown "
                f"lasting {GENERIC_LASTED:.0f} s, or said {GENERIC_UNTIMED} times by lines "
                f"without a clock")  # fmt: skip

    def said_before_read(self, rank: int) -> bool:
        """Whether the rank's wait by the console's grammar counts more attempts than this
        reader read lines of it (`retrying... (attempt 60/60)`, read once): the lines before
        were written where it did not read them -- a paste kept the last, or a saved console
        is being replayed."""
        said = self._said.get(rank)
        return said is not None and self._attempts.get(rank, 0) > said[1]

    def _framework_waits(self) -> bool:
        """Whether a framework's reader declared a wait of a rank that nothing ended."""
        generic = {r for r, _ in self._generic}
        return bool(self._reported) and bool(self._reported - generic or self._framework)

    @property
    def generic_only(self) -> bool:
        """Whether every open wait is one only the console's grammar declared (`_generic`):
        none a framework's reader declared, nor one of the catalogue's its lines do not date
        (kubectl's `(x351 over 23h)`: `runwatch watch` leaves it open, as a framework's wait
        declared with no duration, for the service's rule to decide, as diagnose does)."""
        return (bool(self._generic) and not self._framework_waits()
                and not self._generic & self._undated)  # fmt: skip

    def _generic_ended(self) -> list[Found]:
        """The console went on after waits only its grammar declared: they ended -- and with
        no framework's wait open, every rank is out of a wait, as after progress."""
        self._said.clear()
        self._attempts.clear()
        self._declared = None
        if not self._generic:
            return []
        framework = self._framework_waits()
        ended = self._generic
        self._generic = set()
        self._undated.clear()
        for key in ended:
            self._since.pop(key, None)
        if not framework:
            return self._ended()
        ranks = {r for r, _ in ended} - {r for r, _ in self._since}
        self._reported -= ranks
        self._framework -= ranks
        return self._exited(sorted(ranks))

    def _ended(self) -> list[Found]:
        if not self._reported:
            return []
        self._reported.clear()
        self._framework.clear()
        self._since.clear()
        return self._exited(range(max(self.world, 1)))

    def _exited(self, ranks: Iterable[int]) -> list[Found]:
        """Those ranks out of their waits (the rule's "nothing is waiting")."""
        world = max(self.world, 1)
        return [("rank.status", {"rank": r, "world_size": world, "phase": "exited"})
                for r in ranks]  # fmt: skip
