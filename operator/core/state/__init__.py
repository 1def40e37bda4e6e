"""The cluster as the scheduler sees it: typed views of API objects, the node table, the cache.
Imports nothing else of shoal."""
