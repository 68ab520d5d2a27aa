"""HTTP routes, one ``APIRouter`` per module."""
