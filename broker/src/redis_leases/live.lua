-- Which of the given leases are live: their fence, not ended, not expired by the server's clock.
-- ARGV: lease id, fence, lease id, fence, … Returns one 1 (live) or 0 per lease, in order.
-- Reads only: a proxy instance asks this for every lease its tunnels ride, every few hundred ms.
local now, answer = clock(), {}
for i = 1, #ARGV, 2 do
  local l = judge(ARGV[i], tonumber(ARGV[i + 1]), now)
  answer[#answer + 1] = l and 1 or 0
end
return answer
