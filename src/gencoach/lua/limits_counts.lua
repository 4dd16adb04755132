-- Read a stage's counts at the server's present time; writes nothing.
--
-- ARGV: none. Outcome: 'counts'.

return reply('counts', '', now_ms())
