"""One vocabulary for a link's directions, as users write them and every module reads them.

A link's `forward` direction carries the client's packets towards the server, `reverse` the server's towards the
client, whatever the order of the link's `ends` (topologies/README.md). A schedule's change may act on `both`; a
claim's or an analysis' loss class may count `any` direction. (The delay element names its sides `ab` and `ba`:
`fecbench.timekeeping.delayline.SIDE_OF`.)
"""

from __future__ import annotations

LINK_DIRECTIONS = ("forward", "reverse")
#: A schedule's change: one direction, or both.
SCHEDULE_DIRECTIONS = (*LINK_DIRECTIONS, "both")
#: A loss class (claims, loss-position analyses): one direction's packets, or either's.
CLASS_DIRECTIONS = (*LINK_DIRECTIONS, "any")
#: The direction a side's packets cross.
SENDER_DIRECTION = {"client": "forward", "server": "reverse"}
#: The direction a workload's data crosses ("any": both carry it, a request/response's).
DATA_DIRECTION = {"upload": "forward", "download": "reverse", "messages": "reverse", "reqresp": "any",
                  "page": "reverse"}
