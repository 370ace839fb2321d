-- Argo CD health of a hosting.unitlet.dev Generation. A Generation says
-- "start may have run" with Started=Unknown and "kill not proven" with
-- Terminated=False; both are Degraded. A retired Generation proven gone
-- is Healthy: it is kept as history, and Suspended would mark the whole
-- application suspended for as long as it stays.
local function find(conditions, type)
  for _, c in ipairs(conditions) do
    if c.type == type then
      return c
    end
  end
  return nil
end

local function say(label, c)
  local text = label
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
local phase = nil
if obj.status ~= nil then
  conditions = obj.status.conditions or {}
  phase = obj.status.phase
end

for _, type in ipairs({"KillUnproven", "StartUncertain", "Stalled"}) do
  local c = find(conditions, type)
  if c ~= nil and c.status == "True" then
    hs.status = "Degraded"
    hs.message = say(type, c)
    return hs
  end
end

local terminated = find(conditions, "Terminated")
if terminated ~= nil and terminated.status == "False" then
  hs.status = "Degraded"
  hs.message = say("KillUnproven", terminated)
  return hs
end
local started = find(conditions, "Started")
if started ~= nil and started.status == "Unknown" then
  hs.status = "Degraded"
  hs.message = say("StartUncertain", started)
  return hs
end

if obj.spec ~= nil and obj.spec.retired == true then
  if terminated ~= nil and terminated.status == "True" then
    hs.status = "Healthy"
    hs.message = "retired; proven gone"
  else
    hs.status = "Progressing"
    hs.message = "retiring"
  end
  return hs
end

if phase == "Failed" then
  hs.status = "Degraded"
  local why = nil
  if started ~= nil and started.status == "False" then
    why = started
  else
    local r = find(conditions, "Ready")
    if r ~= nil and r.status == "False" then
      why = r
    end
  end
  if why ~= nil then
    hs.message = say("Failed", why)
  else
    hs.message = "Failed"
  end
  return hs
end

local ready = find(conditions, "Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or "Ready"
  return hs
end

hs.status = "Progressing"
if ready ~= nil and ready.message ~= nil and ready.message ~= "" then
  hs.message = say("Ready", ready)
elseif phase ~= nil then
  hs.message = phase
else
  hs.message = "waiting for the node agent to report"
end
return hs
