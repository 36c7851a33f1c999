"""What the ledger stores on the consolidator's behalf: feedback-channel rules that recall injects
and expression candidates (their five-state event log). Reached only through
`tavern.rpc.ledger.consolidation.*`; the consolidator keeps its drafts and policy decisions.
"""
