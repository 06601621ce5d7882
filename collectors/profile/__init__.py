"""Server CPU symbol profiles with Linux ``perf``, folded into flame-graph stacks; client profiles with py-spy.

The output is a *folded* profile: ``{"kind;comm;root_frame;...;leaf_frame": samples}``,
where ``kind`` names the server process or thread role ("backend",
"checkpointer", "connection", ...). Samples are taken at ``freq_hz`` per
running thread, so ``samples / freq_hz`` is CPU seconds.

One module per step, each imported by its own name (this package re-exports nothing):

- :mod:`collectors.profile.record`: ``perf record`` / ``perf script`` runs (:func:`~.record.probe_perf`,
  :func:`~.record.record_profile`);
- :mod:`collectors.profile.procs`: which server role a process or thread plays, from /proc and stacks;
- :mod:`collectors.profile.parse`: ``perf script`` text -> samples -> folded stacks; folded files;
- :mod:`collectors.profile.analyse`: the self-time table, samples without symbols and how to get them;
- :mod:`collectors.profile.offcpu`: off-CPU time from the scheduler's tracepoints, folded in µs;
- :mod:`collectors.profile.pyspy`: py-spy of the Python client processes.

Frame names are untrusted text (they come from binaries on the host): ``;`` is
replaced so it cannot split a stack, and renderers must escape them.
"""
