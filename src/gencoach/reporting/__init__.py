"""What a generator embeds to report to gencoach: the reporters (`client`), their I/O-free
core (`outbox`) and the branch-order reader (`orders`)."""
