-- Per-agent rate limits: a large agent platform may need more than the node's
-- defaults (pactd serve --rate-limit-pa / --rate-limit-user); null keeps the
-- default. Set with `pactd agent add --rate-limit-pa RATE,BURST ...`.
alter table agents
    add column pa_rate    double precision check (pa_rate >= 0),
    add column pa_burst   double precision check (pa_burst >= 1),
    add column user_rate  double precision check (user_rate >= 0),
    add column user_burst double precision check (user_burst >= 1),
    add constraint agents_pa_limit_whole check ((pa_rate is null) = (pa_burst is null)),
    add constraint agents_user_limit_whole check ((user_rate is null) = (user_burst is null));
