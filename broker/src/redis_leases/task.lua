-- The live lease of a task, of any class: {id, fence}, or {} when it holds none.
-- ARGV: the task.
local task, now = ARGV[1], clock()
for _, class in ipairs(NAMES) do
  local id = redis.call('GET', task_key(class, task))
  if id then
    local l = read_lease(id)
    if l and l.state == 'live' and l.expires > now then return { id, int(l.fence) } end
  end
end
return {}
