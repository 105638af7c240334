-- The step-up lookups (a turn reusing a live step-up authorization, the PA's
-- device authorization taking one over) filter on the caller; without this
-- index each of them scanned every live authorization.
create index device_authorizations_step_up
    on device_authorizations (brand_id, pa_issuer, pa_sub)
    where origin = 'step_up';
