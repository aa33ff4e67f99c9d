"""Time-keeping: how the drivers decide what time it is and whether an event's time can be
believed -- the plausible bounds of a `ts` (timebounds), the hosts' clock skew put on the
broker's clock (skew), replay time no far-ahead event can hijack (ahead), the reorder window
(reorder), and silence judged only on time that could have been heard (reading). Pure, as
the rest of the core: no clock is read here, every time is given."""
