"""Studies: one question each (a knob, a counter, a meter), answered with the harness in evaluation/."""
