"""The pure scheduling core: objects, apply(event), one allocation step, a cycle. No I/O, no clock."""
