"""Replay's name for the log's synchronous read side, which lives in ``events/log/source.py``.

Kept so that replay's modules and their tests import as before; new code imports ``events.log.source``.
"""

from __future__ import annotations

from events.log.source import (
    PULL_CHUNK as PULL_CHUNK,
)
from events.log.source import (
    BoundedSource as BoundedSource,
)
from events.log.source import (
    FileSource as FileSource,
)
from events.log.source import (
    InputCursor as InputCursor,
)
from events.log.source import (
    InputGap as InputGap,
)
from events.log.source import (
    LogSource as LogSource,
)
from events.log.source import (
    LogUnavailable as LogUnavailable,
)
from events.log.source import (
    OrderedChannels as OrderedChannels,
)
from events.log.source import (
    OutputsAt as OutputsAt,
)
from events.log.source import (
    channel_order as channel_order,
)
from events.log.source import (
    input_total as input_total,
)
from events.log.source import (
    open_file_log as open_file_log,
)
from events.log.source import (
    output_at as output_at,
)
from events.log.source import (
    outputs_end as outputs_end,
)
from events.log.source import (
    read_range as read_range,
)
