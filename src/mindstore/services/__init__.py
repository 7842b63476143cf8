"""Services above the repositories: what a tenant's view offers beyond storage.

Layers, each importing only those below it: `model` (pure) -> `pipelines` (pure) ->
`repositories` (one collection's reads and guarded writes) -> `compression` (levels,
checkpoints, windows, built on the task repository) -> `services` (the task API with its
context window, agents) -> `store` (the facade: `connect()`, `scoped()`) -> `commands`,
`cli`. A repository never imports compression, services or the store.
"""
