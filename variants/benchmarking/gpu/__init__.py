"""Measuring on a GPU: the GPU report (:mod:`.report`, over :mod:`.torch_modes`, :mod:`.ort` and
:mod:`.timing`) and the app asked on a GPU (:mod:`.app`). Nothing outside this package imports it but the
command line; it imports the other tools (the served-latency client, the chain bench's record writer)."""
