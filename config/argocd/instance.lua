-- Argo CD health of a hosting.unitlet.dev Instance, read from the
-- conditions its node agent writes. Abnormal-true conditions win: a kill
-- not proven or a start that may have run is never hidden behind a
-- suspension or a swap in progress.
local function find(conditions, type)
  for _, c in ipairs(conditions) do
    if c.type == type then
      return c
    end
  end
  return nil
end

local function say(c)
  local text = c.type
  if c.reason ~= nil and c.reason ~= "" then
    text = text .. " (" .. c.reason .. ")"
  end
  if c.message ~= nil and c.message ~= "" then
    text = text .. ": " .. c.message
  end
  return text
end

local hs = {}
local conditions = {}
if obj.status ~= nil and obj.status.conditions ~= nil then
  conditions = obj.status.conditions
end

for _, type in ipairs({"KillUnproven", "StartUncertain", "Stalled"}) do
  local c = find(conditions, type)
  if c ~= nil and c.status == "True" then
    hs.status = "Degraded"
    hs.message = say(c)
    return hs
  end
end

if obj.spec ~= nil and obj.spec.suspend == true then
  hs.status = "Suspended"
  hs.message = "suspended: every generation is retired"
  local r = find(conditions, "Reconciling")
  if r ~= nil and r.status == "True" then
    hs.message = "suspended; " .. say(r)
  end
  return hs
end

if #conditions == 0 then
  hs.status = "Progressing"
  hs.message = "waiting for the node agent to report"
  return hs
end

local reconciling = find(conditions, "Reconciling")
if reconciling ~= nil and reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = say(reconciling)
  return hs
end

local generation = obj.metadata and obj.metadata.generation
local observed = obj.status and obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.status = "Progressing"
  hs.message = "waiting for the node agent to observe generation " .. tostring(generation)
  return hs
end

local ready = find(conditions, "Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or "Ready"
  return hs
end
if ready ~= nil and ready.status == "False" then
  -- Not reconciling and not ready: the agent has settled on a failure.
  hs.status = "Degraded"
  hs.message = say(ready)
  return hs
end
hs.status = "Progressing"
hs.message = "waiting for Ready"
return hs
