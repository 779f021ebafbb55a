"""Use cases: the only thing the CLI calls.

``cortex`` is the public facade (``Cortex``); it builds a ``context.Context``
and hands it to the use-case modules: ``memories`` (write, update, tag, head,
forget, show, history, find's checks), ``find``, ``semantic`` (vectors, the
index file, reindex), ``attest``, ``compact``, ``transfer`` (import, export)
and ``verify`` (with ``replay``). ``rows`` builds rows and journal payloads,
``refs`` resolves references, ``salience`` holds the salience formulas and
``results`` the result documents the engine returns. The store is reached only
through ``store.interface``.
"""
