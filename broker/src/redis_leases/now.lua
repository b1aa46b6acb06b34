-- The server's clock, ms: on the node that holds the pool, in a Redis Cluster.
return clock()
