-- Bounded authority (PACT §5.7, RFC 9396): what a person approved stays with
-- the grant, limits can be consumed, and a call beyond them is put to the
-- person as one operation.

-- What the grant was approved under (pact-server domain/terms.rs): each
-- granted entry with its type as declared at approval, the tools of the
-- refined scopes with their rules, the budget rows of consumed limits, and
-- operations approved one by one. Null on grants made before this
-- migration: filled from the declarations of the moment on first use.
alter table grants add column terms jsonb;

-- Budgets of `count` and `cumulative_amount` limits: calls, or minor units
-- of `currency`. Not owned by one grant: a step-up's grant carries the
-- entries of the grants it replaces with the same budget rows, so a limit
-- used up stays used up. Charged all-or-nothing by pactd_charge_budgets.
create table grant_budgets (
    id          uuid primary key,
    cap         bigint not null check (cap >= 0),
    used        bigint not null default 0 check (used >= 0),
    currency    text check (currency ~ '^[A-Z]{3}$'),
    -- the latest expiry of a grant holding it; housekeeping removes it after
    expires_at  timestamptz not null,
    created_at  timestamptz not null default now()
);
create index grant_budgets_expiry on grant_budgets (expires_at);

-- Charges every budget its amount, or none of them: one statement, so 20
-- parallel calls against a count of 1 charge it exactly once (each update
-- waits for the row lock and re-checks `used + amount <= cap` on the row
-- as committed). Rows are taken in id order so two charges never deadlock.
create function pactd_charge_budgets(ids uuid[], amounts bigint[]) returns boolean
language plpgsql as $$
declare
    i integer;
begin
    if coalesce(array_length(ids, 1), 0) <> coalesce(array_length(amounts, 1), 0) then
        raise exception 'pactd_charge_budgets: % ids but % amounts',
            coalesce(array_length(ids, 1), 0), coalesce(array_length(amounts, 1), 0);
    end if;
    begin
        for i in select s from generate_subscripts(ids, 1) as s order by ids[s] loop
            update grant_budgets set used = used + amounts[i]
             where id = ids[i] and amounts[i] >= 0 and used + amounts[i] <= cap;
            if not found then
                raise exception using errcode = 'PD001';
            end if;
        end loop;
    exception when sqlstate 'PD001' then
        -- The block's updates are undone with it: nothing was charged.
        return false;
    end;
    return true;
end;
$$;

-- A step-up beyond a limit: the operations the person is asked about, with
-- the call's arguments (for the consent page, in the person's language) and
-- the grant it was called under. Null for every other authorization.
alter table device_authorizations add column operations jsonb;

-- Tools say which argument a limit applies to (`enforce`, as written:
-- FIELD=ARG, TYPE.FIELD=ARG, or FIELD for a count), and how one call reads
-- to a person when it has to be approved on its own (`summary`, with {arg}
-- placeholders).
alter table brand_tools add column summary text not null default ''
    check (length(summary) <= 1000);
comment on column brand_tools.enforce is
    'the tool''s limit rules as written (FIELD=ARG, TYPE.FIELD=ARG, FIELD): the one place they live';

-- Rules declared inside a type move to the tool they name, qualified by
-- the type, unless the tool already has the same FIELD=ARG rule.
with rules as (
    select b.id as brand_id, r.value ->> 'tool' as tool,
           t.key || '.' || (r.value ->> 'field') || '=' || (r.value ->> 'arg') as qualified,
           (r.value ->> 'field') || '=' || (r.value ->> 'arg') as plain
      from brands b
     cross join lateral jsonb_each(
            case when jsonb_typeof(b.settings -> 'authorization_details_types') = 'object'
                 then b.settings -> 'authorization_details_types' else '{}'::jsonb end) t
     cross join lateral jsonb_array_elements(
            case when jsonb_typeof(t.value -> 'enforce') = 'array'
                 then t.value -> 'enforce' else '[]'::jsonb end) r
), missing as (
    select bt.brand_id, bt.name, jsonb_agg(distinct r.qualified) as added
      from brand_tools bt
      join rules r on r.brand_id = bt.brand_id and r.tool = bt.name
     where not bt.enforce @> jsonb_build_array(r.plain)
     group by bt.brand_id, bt.name
)
update brand_tools bt set enforce = bt.enforce || m.added
  from missing m
 where bt.brand_id = m.brand_id and bt.name = m.name;

update brands set settings = jsonb_set(
        settings, '{authorization_details_types}',
        (select coalesce(jsonb_object_agg(key, value - 'enforce'), '{}'::jsonb)
           from jsonb_each(settings -> 'authorization_details_types')))
 where jsonb_typeof(settings -> 'authorization_details_types') = 'object'
   and exists (select 1 from jsonb_each(settings -> 'authorization_details_types') t
                where t.value ? 'enforce');
