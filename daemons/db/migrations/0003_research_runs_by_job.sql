-- The highest job id the research archive holds (`research::highest_job`): job
-- counters in ZooKeeper must stay past it, or a counter moved back (re-created at 0
-- after the reaper deleted old jobs, or restored from an old backup) hands out ids
-- the archive already names (outside 17g finding 3). Indexed, so the planner can ask
-- before each job it creates.
CREATE INDEX research_runs_by_job ON research_runs (job);
