-- Drop runs from the index (ARGV[2..]: run ids); then up to 1000 runs whose keys expired.
-- Returns how many were dropped.

local dropped = 0
for index = 2, #ARGV do
  dropped = dropped + drop(ARGV[index])
end
return dropped + sweep(1000)
