"""Character cards, lorebooks and personas: decoding (JSON V1/V2/V3, PNG) and the one way an
import is published to ASSETS. Shared by the projector, the CLI and the gateway."""
