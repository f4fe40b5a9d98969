"""Cron schedules: start a workflow at each occurrence of a cron expression in a time zone.

Expressions are standard 5-field cron (minute hour day-of-month month day-of-week), or 6
fields with a leading seconds field, or one of ``@yearly`` ``@annually`` ``@monthly``
``@weekly`` ``@daily`` ``@midnight`` ``@hourly``; a time zone is an IANA name
(``Europe/Berlin``). A bad expression or zone raises :class:`CronValidationError`, a
``ValueError`` whose ``field`` is ``cronExpression`` or ``timezone``.

Occurrences are wall-clock times in the schedule's zone, stored as UTC epoch seconds (whole
seconds). Across daylight-saving changes every occurrence fires exactly once:

- a local time that does not exist (clocks jump forward over it: ``30 2 * * *`` in
  Europe/Berlin on the last Sunday of March) fires at the first instant after the jump
  (03:00 CEST); the times inside the gap that fall on one instant fire once;
- a local time that happens twice (clocks go back: ``30 1 * * *`` in America/New_York on the
  first Sunday of November) fires once, at its first instance (01:30 EDT), unless the
  expression fires in every hour (its hour field is ``*``): then it fires in both passes, so
  ``*/15 * * * *`` keeps firing every 15 minutes of real time through the repeated hour.

:class:`Scheduler` fires due occurrences; any number of schedulers may run against one
database, each occurrence being claimed once (see :mod:`longcall.store.cron`). An occurrence
counts as *missed* when the scheduler gets to it more than ``misfire_grace`` seconds late
(the schedule was paused, or no scheduler ran); the schedule's misfire policy decides:

- ``skip`` (default): missed occurrences are dropped; the schedule goes on with the next one;
- ``run_once``: one run, at the latest due occurrence, stands for all the due ones;
- ``catch_up``: the latest ``catch_up_max`` missed occurrences fire, oldest first, and older
  ones are dropped (``catch_up_max = 0`` is ``skip``), so a long outage is never a burst.

Concurrency policies decide what an occurrence does while a run the schedule started is
queued, running or waiting for input: ``skip`` (default) starts nothing and records the
occurrence as skipped, ``allow`` starts a run beside it, ``queue`` starts a run keyed
``cron:<cron_id>`` that workers start only after the earlier ones ended, in occurrence order.
A run that completes, fails or is cancelled stops counting. A trigger (:meth:`Crons.trigger`)
starts a run now under the same policy (``force`` overrides ``skip``).

Occurrences within the grace always fire. Pausing stops nothing that is running; resuming
hands what was missed in between to the misfire policy. Changing the expression or the zone
restarts the schedule from the next occurrence after the change.
"""

from longcall.core.cron import ConcurrencyPolicy, Cron, CronFire, FireOutcome, MisfirePolicy
from longcall.cron._crons import Crons
from longcall.cron._schedule import ALIASES, MAX_CATCH_UP, CronSchedule, parse, preview
from longcall.cron._scheduler import Scheduler
from longcall.errors import CronConflict, CronNotFound, CronValidationError

__all__ = [
    "ALIASES",
    "MAX_CATCH_UP",
    "ConcurrencyPolicy",
    "Cron",
    "CronConflict",
    "CronFire",
    "CronNotFound",
    "CronSchedule",
    "CronValidationError",
    "Crons",
    "FireOutcome",
    "MisfirePolicy",
    "Scheduler",
    "parse",
    "preview",
]
